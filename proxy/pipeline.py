"""One event's way through the proxy: validate → authorize → route → deliver.

Kept apart from HTTP so that the single and the batch endpoint share it, and so that it
reads like the flow in DESIGN.md §1. :meth:`EventPipeline.check` is pure CPU and never
raises; :meth:`EventPipeline.deliver` returns only when every durable destination has the
event.

This is the one place that decides what a multi-destination delivery means: durable
destinations (kafka, archive, http with ``required: true``) are awaited together and any
failure among them fails the event; best-effort ones (other http) are handed to a
bounded background queue and never delay or fail the client's answer — their failures
are logged and counted, and when the queue is full the event is dropped for them and
counted.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from proxy.auth import Principal
from proxy.destinations import DeliveryError, Destination, TooLarge, payload_limit
from proxy.metrics import ProxyMetrics
from proxy.openlineage import event_kind, subject_name
from proxy.router import Route, Router
from proxy.validation import EventValidator

__all__ = ["BestEffortQueue", "EventPipeline", "Rejection"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why one event was not accepted; ``retriable`` tells the client whether to resend."""

    status: int
    reason: str
    error: str
    details: list[dict[str, str]] = field(default_factory=list)
    retriable: bool = False


class BestEffortQueue:
    """Deliveries to best-effort destinations, off the request path, bounded."""

    def __init__(self, size: int, concurrency: int, metrics: ProxyMetrics) -> None:
        self.metrics = metrics
        self.concurrency = concurrency
        self._queue: asyncio.Queue[tuple[Destination, dict[str, Any], bytes]] = asyncio.Queue(size)
        self._workers: list[asyncio.Task[None]] = []

    def start(self, deliver_one: DeliverOne) -> None:
        self._workers = [
            asyncio.create_task(self._work(deliver_one), name=f"best-effort-{i}")
            for i in range(self.concurrency)
        ]

    def submit(self, destination: Destination, event: dict[str, Any], payload: bytes) -> None:
        try:
            self._queue.put_nowait((destination, event, payload))
        except asyncio.QueueFull:
            self.metrics.best_effort_dropped.labels(destination.name).inc()
            log.warning("best-effort queue full: event not sent to %s", destination.name)

    async def _work(self, deliver_one: DeliverOne) -> None:
        while True:
            destination, event, payload = await self._queue.get()
            try:
                await deliver_one(destination, event, payload)
            except Exception as exc:
                log.warning("best-effort delivery to %s failed: %s", destination.name, exc)
            finally:
                self._queue.task_done()

    async def close(self, drain_seconds: float) -> None:
        """Give queued deliveries up to ``drain_seconds``, then stop."""
        try:
            await asyncio.wait_for(self._queue.join(), drain_seconds)
        except TimeoutError:
            log.error("%d best-effort deliveries dropped at shutdown", self._queue.qsize())
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)


DeliverOne = Callable[[Destination, dict[str, Any], bytes], Awaitable[None]]


class EventPipeline:
    def __init__(
        self,
        validator: EventValidator,
        router: Router,
        metrics: ProxyMetrics,
        best_effort: BestEffortQueue,
    ) -> None:
        self.validator = validator
        self.router = router
        self.metrics = metrics
        self.best_effort = best_effort
        self._in_flight = 0
        metrics.in_flight.set_function(lambda: self._in_flight)
        # Labelled metric children looked up once: labels() costs a lock and a hash per call.
        self._accepted = functools.cache(metrics.accepted.labels)
        self._latency = functools.cache(metrics.delivery_seconds.labels)

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

    async def deliver(self, event: dict[str, Any]) -> bool:
        """Route and deliver; raise :class:`DeliveryError` if a durable destination failed.
        True when a destination holds the event in its local spool (Kafka unreachable)."""
        spooled = await self._deliver_route(self.router.route(event))
        kind = event_kind(event)
        self._accepted(kind.value if kind else "unknown").inc()
        return spooled

    async def deliver_rejected(self, event: Any, rejection: Rejection) -> None:
        """Send an event that failed validation, with its reasons, to the ``rejected``
        route if the rules name one. The client's 4xx does not depend on it: failures
        are logged and counted, never raised."""
        envelope = {
            "eventTime": datetime.now(UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "rejection": {
                "status": rejection.status,
                "reason": rejection.reason,
                "error": rejection.error,
                "details": rejection.details,
            },
            "event": event,
        }
        route = self.router.route_rejected(envelope)
        try:
            await self._deliver_route(route)
        except DeliveryError as exc:
            log.warning("rejected event not stored: %s", exc)

    async def _deliver_route(self, route: Route) -> bool:
        if not route.destinations:
            return False
        payload = orjson.dumps(route.event)
        durable = [d for d in route.destinations if d.durable]
        _refuse_oversized(durable, len(payload))
        for destination in route.destinations:
            if not destination.durable:
                self.best_effort.submit(destination, route.event, payload)
        if not durable:
            return False
        self._in_flight += 1
        try:
            if len(durable) == 1:
                # Awaiting directly spares a task per event in the one-destination case.
                results: list[BaseException | bool | None] = [
                    await _outcome(self.deliver_to(durable[0], route.event, payload))
                ]
            else:
                results = await asyncio.gather(
                    *(self.deliver_to(d, route.event, payload) for d in durable),
                    return_exceptions=True,
                )
        finally:
            self._in_flight -= 1
        failures = [
            (d, r) for d, r in zip(durable, results, strict=True) if isinstance(r, BaseException)
        ]
        for destination, error in failures:
            log.warning("delivery to %s failed: %s", destination.name, error)
        if failures:
            error = failures[0][1]
            if isinstance(error, DeliveryError):
                raise error
            raise DeliveryError("pipeline", repr(error), retriable=True) from error
        return any(r is True for r in results)

    async def deliver_to(
        self, destination: Destination, event: dict[str, Any], payload: bytes
    ) -> bool | None:
        """Deliver to one destination, timed and counted (also the best-effort workers')."""
        started = time.perf_counter()
        try:
            spooled = await destination.deliver(event, payload)
        except DeliveryError as exc:
            self.metrics.delivery_failures.labels(destination.name, str(exc.retriable)).inc()
            raise
        self._latency(destination.name).observe(time.perf_counter() - started)
        return spooled


def _refuse_oversized(durable: list[Destination], size: int) -> None:
    """Raise :class:`TooLarge` before anything is written when a durable destination
    could never take the event, so that no other destination keeps a copy of it."""
    for destination in durable:
        limit = payload_limit(destination)
        if limit is not None and size > limit:
            raise TooLarge(destination.name, size, limit)


async def _outcome(delivery: Awaitable[bool | None]) -> BaseException | bool | None:
    """What ``gather(..., return_exceptions=True)`` would give for one awaitable."""
    try:
        return await delivery
    except Exception as exc:
        return exc
