"""One event's way through the proxy: validate → authorize → route → deliver.

Kept apart from HTTP so that the single and the batch endpoint share it, and so that it
reads like the flow in DESIGN.md §1. :meth:`EventPipeline.check` is pure CPU and never
raises; :meth:`EventPipeline.deliver` returns only when every durable destination has the
event.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.auth import Principal
from proxy.destinations import DeliveryError, Destination
from proxy.metrics import ProxyMetrics
from proxy.openlineage import event_kind, subject_name
from proxy.router import Router
from proxy.validation import EventValidator

__all__ = ["EventPipeline", "Rejection"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why one event was not accepted; ``retriable`` tells the client whether to resend."""

    status: int
    reason: str
    error: str
    details: list[dict[str, str]] = field(default_factory=list)
    retriable: bool = False


class EventPipeline:
    def __init__(self, validator: EventValidator, router: Router, metrics: ProxyMetrics) -> None:
        self.validator = validator
        self.router = router
        self.metrics = metrics

    def check(self, event: Any, principal: Principal) -> Rejection | None:
        """Validate and authorize; None when the event may be delivered.

        Rejections are counted where they become a response, once per event.
        """
        issues = self.validator.validate(event)
        if issues:
            return Rejection(
                400,
                "invalid",
                "event does not follow the OpenLineage spec",
                [{"pointer": i.pointer, "message": i.message} for i in issues],
            )
        subject = subject_name(event)
        if subject is not None and not principal.may_post_for(subject[0]):
            pointer = "/dataset/namespace" if "job" not in event else "/job/namespace"
            return Rejection(
                403,
                "forbidden",
                f"token {principal.name!r} may not post events for namespace {subject[0]!r}",
                [{"pointer": pointer, "message": "namespace outside the token's scope"}],
            )
        return None

    async def deliver(self, event: dict[str, Any]) -> None:
        """Route and deliver; raise :class:`DeliveryError` if a durable destination failed."""
        route = self.router.route(event)
        if not route.destinations:
            return
        payload = orjson.dumps(route.event)
        self.metrics.in_flight.inc()
        try:
            results = await asyncio.gather(
                *(self._deliver_one(d, route.event, payload) for d in route.destinations),
                return_exceptions=True,
            )
        finally:
            self.metrics.in_flight.dec()
        failures = [
            (d, r)
            for d, r in zip(route.destinations, results, strict=True)
            if isinstance(r, BaseException)
        ]
        for destination, error in failures:
            log.warning("delivery to %s failed: %s", destination.name, error)
        durable = [e for d, e in failures if d.durable]
        if durable:
            error = durable[0]
            if isinstance(error, DeliveryError):
                raise error
            raise DeliveryError("pipeline", repr(error), retriable=True) from error
        kind = event_kind(event)
        self.metrics.accepted.labels(kind.value if kind else "unknown").inc()

    async def _deliver_one(
        self, destination: Destination, event: dict[str, Any], payload: bytes
    ) -> None:
        started = time.perf_counter()
        try:
            await destination.deliver(event, payload)
        except DeliveryError as exc:
            self.metrics.delivery_failures.labels(destination.name, str(exc.retriable)).inc()
            raise
        self.metrics.delivery_seconds.labels(destination.name).observe(
            time.perf_counter() - started
        )
