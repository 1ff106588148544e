"""One event's way through the proxy: validate (repair) → authorize → route → deliver.

Kept apart from HTTP so that the single and the batch endpoint share it, and so that it
reads like the flow: validate, authorize, route, deliver. :meth:`EventPipeline.check` is
pure CPU and never raises; an event that fails validation only at places a named repair
can fix is repaired, validated again and accepted as a ``RepairedEvent`` copy.
:meth:`EventPipeline.deliver` returns only when every durable destination has the event.

This is the one place that decides what a multi-destination delivery means: durable
destinations (kafka, archive, http with ``required: true``) are awaited together and any
failure among them fails the event; best-effort ones (other http) are handed to a
bounded background queue and never delay or fail the client's answer — their failures
are logged and counted, and when the queue is full (in events, or in bytes: the queue
budget, ``server.max_queued_bytes``) the event is dropped for them and counted.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from proxy.auth.principal import Principal
from proxy.destinations import DeliveryError, Destination, TooLarge
from proxy.destinations.hops import carrying, current_hops
from proxy.ingest.repair_log import RepairLog
from proxy.ingest.router import Route, Router, Trace
from proxy.metrics.process import ProxyMetrics
from proxy.openlineage import event_kind
from proxy.openlineage.rejected import rejected_envelope
from proxy.openlineage.repaired import Repair, RepairedEvent
from proxy.support.logs import REQUEST_ID
from proxy.support.queued_bytes import Queue, QueueBudget
from proxy.support.throttled_log import ThrottledLog
from proxy.tap.hub import TapHub
from proxy.validation import EventValidator
from proxy.validation.exact_json import dumps
from proxy.validation.repairs import EventRepairer, validate_or_repair

__all__ = ["Accepted", "BestEffortQueue", "EventPipeline", "Rejection", "RejectionReason"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class RejectionReason(enum.StrEnum):
    """Why an event was not accepted: its answer's ``reason`` and its metrics label."""

    INVALID = "invalid"  # breaks the spec: also sent to the ``rejected`` route
    FORBIDDEN = "forbidden"
    TOO_LARGE = "too_large"
    TOO_DEEP = "too_deep"  # nested deeper than the proxy can store (ingest.MAX_EVENT_DEPTH)
    UNAVAILABLE = "unavailable"
    UNDELIVERABLE = "undeliverable"


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why one event was not accepted; ``retriable`` tells the client whether to resend."""

    status: int
    reason: RejectionReason
    error: str
    details: list[dict[str, str]] = field(default_factory=list)
    retriable: bool = False


@dataclass(frozen=True, slots=True)
class Accepted:
    """An event that may be delivered: as it came, or a repaired copy."""

    event: dict[str, Any]
    # The event's compact JSON, when the depth check wrote it and nothing changed the
    # event since (not repaired): the destinations' payload if no rule transforms it.
    written: bytes | None = None

    @property
    def repairs(self) -> tuple[Repair, ...]:
        return self.event.repairs if isinstance(self.event, RepairedEvent) else ()


class BestEffortQueue:
    """Deliveries to best-effort destinations, off the request path, bounded.

    Bounded in events (``size``) and in bytes: each delivery holds its payload's size of
    the process's queue budget from :meth:`submit` until it was delivered or failed —
    a target that never answers would otherwise gather ``size`` events of any size.
    """

    def __init__(
        self,
        size: int,
        concurrency: int,
        metrics: ProxyMetrics,
        budget: QueueBudget | None = None,
    ) -> None:
        self.metrics = metrics
        self.concurrency = concurrency
        self.budget = budget if budget is not None else QueueBudget()
        # Each delivery with the proxies its event passed (the loop guard's count: the
        # workers run outside the request's context).
        self._queue: asyncio.Queue[tuple[Destination, dict[str, Any], bytes, int]] = asyncio.Queue(
            size
        )
        self._workers: list[asyncio.Task[None]] = []
        # A target that is down fails (or has dropped) every event: one line per
        # destination every few seconds, the counters have the numbers.
        self._log = ThrottledLog(log)

    def start(self, deliver_one: DeliverOne) -> None:
        self._workers = [
            asyncio.create_task(self._work(deliver_one), name=f"best-effort-{i}")
            for i in range(self.concurrency)
        ]

    def submit(self, destination: Destination, event: dict[str, Any], payload: bytes) -> None:
        if self._queue.full():
            self._drop(destination, "queue full")
        elif not self.budget.take(Queue.BEST_EFFORT, len(payload)):
            self._drop(destination, "server.max_queued_bytes reached")
        else:
            self._queue.put_nowait((destination, event, payload, current_hops()))

    def _drop(self, destination: Destination, why: str) -> None:
        self.metrics.best_effort_dropped.labels(destination.name).inc()
        self._log.warning(
            f"dropped:{destination.name}",
            "best-effort event not sent to %s: %s",
            destination.name,
            why,
            extra={"destination": destination.name},
        )

    async def _work(self, deliver_one: DeliverOne) -> None:
        while True:
            destination, event, payload, hops = await self._queue.get()
            try:
                with carrying(hops):
                    await deliver_one(destination, event, payload)
            except Exception as exc:
                self._log.warning(
                    f"failed:{destination.name}",
                    "best-effort delivery to %s failed: %s",
                    destination.name,
                    exc,
                    extra={"destination": destination.name},
                )
            finally:
                self.budget.give_back(Queue.BEST_EFFORT, len(payload))
                del event, payload  # not held while this worker waits for the next
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


# What a delivery resolves to (spooled or not) does not matter off the request path.
DeliverOne = Callable[[Destination, dict[str, Any], bytes], Awaitable[object]]


class EventPipeline:
    def __init__(
        self,
        validator: EventValidator,
        router: Router,
        metrics: ProxyMetrics,
        best_effort: BestEffortQueue,
        repairer: EventRepairer,
        tap: TapHub | None = None,
    ) -> None:
        self.validator = validator
        self.tap = tap if tap is not None else TapHub()
        self.repairer = repairer
        self.repair_log = RepairLog()
        self.router = router
        self.metrics = metrics
        self.best_effort = best_effort
        self._in_flight = 0
        metrics.in_flight.set_function(lambda: self._in_flight)
        # Labelled metric children looked up once: labels() costs a lock and a hash per call.
        self._accepted = functools.cache(metrics.accepted.labels)
        self._latency = functools.cache(metrics.delivery_seconds.labels)
        # A destination that is down fails every request: one log line per destination
        # every few seconds, not one per request (the counters have the numbers).
        self._failure_log = ThrottledLog(log)

    def check(
        self, event: Any, principal: Principal, written: bytes | None = None
    ) -> Accepted | Rejection:
        """Validate (repairing if allowed) and authorize; ``written``: the event's compact
        JSON if known, kept on the :class:`Accepted` unless a repair changed the event.

        Rejections are counted where they become a response, once per event.
        """
        event, issues = validate_or_repair(self.validator, self.repairer, event)
        if issues:
            return Rejection(
                400,
                RejectionReason.INVALID,
                "event does not follow the OpenLineage spec",
                [{"pointer": i.pointer, "message": i.message} for i in issues],
            )
        if isinstance(event, RepairedEvent):
            for repair in event.repairs:
                self.metrics.repaired.labels(repair.name).inc()
            self.repair_log.repaired(event)
            written = None
        if (refused := principal.refusal(event)) is not None:
            pointer, namespace, scope = refused
            return Rejection(
                403,
                RejectionReason.FORBIDDEN,
                f"token {principal.name!r} may not post events for namespace {namespace!r}",
                [{"pointer": pointer, "message": f"namespace outside the token's {scope}"}],
            )
        return Accepted(event, written)

    async def deliver(self, event: dict[str, Any], written: bytes | None = None) -> bool:
        """Route and deliver; raise :class:`DeliveryError` if a durable destination failed.
        True when a destination holds the event in its local spool (Kafka unreachable)."""
        [outcome] = await self.deliver_many([event], [written])
        if isinstance(outcome, DeliveryError):
            raise outcome
        return outcome

    async def deliver_many(
        self,
        events: Sequence[dict[str, Any]],
        written: Sequence[bytes | None] | None = None,
    ) -> list[bool | DeliveryError]:
        """:meth:`deliver` for many events (a batch): per event spooled (True), stored
        (False) or why a durable destination did not take it. Each destination gets all
        of its events in one call and the request awaits one future per destination, not
        one per event. ``written``: per event its compact JSON if known (the payload of an
        event no rule transformed), else None."""
        outcomes: list[bool | DeliveryError] = [False] * len(events)
        routed: list[tuple[dict[str, Any], bytes]] = []
        by_destination: dict[Destination, list[int]] = {}
        # Tracing which rules matched is only paid for while someone watches the tap.
        traced: list[tuple[Route[Destination], Trace]] | None = [] if self.tap.listening else None
        for index, event in enumerate(events):
            trace = Trace() if traced is not None else None
            route = self.router.route(event, trace)
            if traced is not None and trace is not None:
                traced.append((route, trace))
            routed.append((route.event, b""))
            if not route.destinations:
                continue
            known = written[index] if written is not None else None
            # A rule that transforms works on a copy: the same object is the same JSON.
            payload = known if known is not None and route.event is event else dumps(route.event)
            durable = [d for d in route.destinations if d.durable]
            try:
                _refuse_oversized(durable, route.event, payload)
            except TooLarge as error:
                outcomes[index] = error
                continue
            routed[index] = (route.event, payload)
            for destination in route.destinations:
                if destination.durable:
                    by_destination.setdefault(destination, []).append(index)
                else:
                    self.best_effort.submit(destination, route.event, payload)
        if by_destination:
            self._in_flight += len(events)
            try:
                results = await _together(
                    [
                        self._deliver_many_to(d, [routed[i] for i in indexes])
                        for d, indexes in by_destination.items()
                    ]
                )
            finally:
                self._in_flight -= len(events)
            for (destination, indexes), result in zip(by_destination.items(), results, strict=True):
                self._merge(destination, indexes, result, outcomes)
        for index, (event, outcome) in enumerate(zip(events, outcomes, strict=True)):
            if not isinstance(outcome, DeliveryError):
                if traced is not None:
                    payload = routed[index][1]
                    self.tap.publish(event, *traced[index], len(payload) if payload else None)
                kind = event_kind(event)
                self._accepted(kind.value if kind else "unknown").inc()
        return outcomes

    def _merge(
        self,
        destination: Destination,
        indexes: list[int],
        result: Sequence[bool | DeliveryError | None] | BaseException,
        outcomes: list[bool | DeliveryError],
    ) -> None:
        """Fold one destination's outcomes into the events': the first failure wins."""
        if isinstance(result, BaseException):
            error = (
                result
                if isinstance(result, DeliveryError)
                else DeliveryError("pipeline", repr(result), retriable=True)
            )
            result = [error] * len(indexes)
        failed = 0
        for index, outcome in zip(indexes, result, strict=True):
            if isinstance(outcome, DeliveryError):
                failed += 1
                if not isinstance(outcomes[index], DeliveryError):
                    outcomes[index] = outcome
            elif outcome is True and outcomes[index] is False:
                outcomes[index] = True
        if failed:
            first = next(o for o in result if isinstance(o, DeliveryError))
            self._failure_log.warning(
                f"delivery:{destination.name}",
                "delivery to %s failed for %d events: %s",
                destination.name,
                failed,
                first,
            )

    async def deliver_rejected(self, event: Any, rejection: Rejection) -> None:
        """Send an event that failed validation, with its reasons, to the ``rejected``
        route if the rules name one. The client's 4xx does not depend on it: failures
        are logged and counted, never raised."""
        envelope = rejected_envelope(
            event,
            {
                "status": rejection.status,
                "reason": rejection.reason,
                "error": rejection.error,
                "details": rejection.details,
                # The id the client was answered with (and our log lines carry).
                "request_id": REQUEST_ID.get(),
            },
        )
        route = self.router.route_rejected(envelope)
        try:
            await self._deliver_route(route)
        except DeliveryError as exc:
            self._failure_log.warning("rejected", "rejected event not stored: %s", exc)

    async def _deliver_route(self, route: Route[Destination]) -> bool:
        """Deliver one routed event (an invalid event's envelope to the rejected route)."""
        if not route.destinations:
            return False
        payload = dumps(route.event)
        durable = [d for d in route.destinations if d.durable]
        _refuse_oversized(durable, route.event, payload)
        for destination in route.destinations:
            if not destination.durable:
                self.best_effort.submit(destination, route.event, payload)
        results = await _together([self.deliver_to(d, route.event, payload) for d in durable])
        failures = [
            (d, r) for d, r in zip(durable, results, strict=True) if isinstance(r, BaseException)
        ]
        for destination, error in failures:
            self._failure_log.warning(
                f"delivery:{destination.name}", "delivery to %s failed: %s", destination.name, error
            )
        if failures:
            error = failures[0][1]
            if isinstance(error, DeliveryError):
                raise error
            raise DeliveryError("pipeline", repr(error), retriable=True) from error
        return any(r is True for r in results)

    async def _deliver_many_to(
        self, destination: Destination, items: list[tuple[dict[str, Any], bytes]]
    ) -> Sequence[bool | DeliveryError | None]:
        """Deliver ``items`` to one destination in one call (``deliver_many``), timed and
        counted."""
        started = time.perf_counter()
        results = await destination.deliver_many(items)
        elapsed = time.perf_counter() - started
        latency = self._latency(destination.name)
        failed = 0
        for result in results:
            if isinstance(result, DeliveryError):
                self.metrics.delivery_failures.labels(destination.name, str(result.retriable)).inc()
                failed += 1
        for _ in range(len(results) - failed):
            latency.observe(elapsed)
        spooled = results.count(True)
        if spooled:
            self.metrics.spooled.labels(destination.name).inc(spooled)
        return results

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
        if spooled is True:
            self.metrics.spooled.labels(destination.name).inc()
        return spooled


def _refuse_oversized(durable: list[Destination], event: dict[str, Any], payload: bytes) -> None:
    """Raise :class:`TooLarge` before anything is written when a durable destination
    could never take the event (Kafka: with its key and headers), so that no other
    destination keeps a copy of it."""
    for destination in durable:
        refusal = destination.refuses_size(event, payload)
        if refusal is not None:
            raise refusal


async def _together(jobs: list[Coroutine[Any, Any, T]]) -> list[T | BaseException]:
    """Run ``jobs`` concurrently; per job its result or its exception (as
    ``gather(..., return_exceptions=True)``), with one task fewer than gather: the last
    job runs in this task. One job (the usual single destination) needs no task."""
    tasks = [asyncio.ensure_future(_outcome(job)) for job in jobs[:-1]]
    last = await _outcome(jobs[-1]) if jobs else None
    results = [await task for task in tasks]
    return [*results, last] if jobs else []  # type: ignore[list-item]


async def _outcome(job: Awaitable[T]) -> T | BaseException:
    """What ``gather(..., return_exceptions=True)`` would give for one awaitable."""
    try:
        return await job
    except Exception as exc:
        return exc
