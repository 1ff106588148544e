"""Retrying a delivery: exponential backoff with full jitter, and a circuit breaker.

Written once and used by both sides of the flow: the consumer daemons retry a message
until the target takes it or refuses it (dead-letter topic), and the proxy's routing side
wraps an HTTP destination the same way but gives up after ``max_attempts`` (a client is
waiting). A destination says *whether* an error is worth retrying
(:attr:`DeliveryError.retriable`) and may ask for a wait (``retry_after``, from HTTP
``Retry-After``); this module decides *how long* to wait and *whether* to give up
(:func:`verdict`).

Backoff is "full jitter": a uniform draw in ``[0, min(cap, initial * 2**n)]``, so that many
consumers hitting the same recovering target do not retry in lockstep. While the circuit
is open the breaker paces the tries instead: one probe per probe interval, capped low so
that a target that is back gets traffic again within seconds.

A consumer also bounds the retries of an event the target keeps failing while it takes
others (:mod:`proxy.destinations.failing_event`); those failures are the event's, not the
target's, so they neither open the circuit nor keep it open.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from proxy.destinations.base import DeliveryError, Destination, TooLarge, Unfit
from proxy.destinations.failing_event import FailingEvent
from proxy.destinations.retry_config import BreakerConfig, RetryConfig

__all__ = [
    "BreakerConfig",
    "CircuitBreaker",
    "CircuitState",
    "OnRetry",
    "RetryConfig",
    "RetryingDestination",
    "Verdict",
    "backoff_seconds",
    "deliver_with_retries",
    "verdict",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
OnRetry = Callable[[DeliveryError, int, float], None]


class Verdict(enum.Enum):
    """What to do with an event after a failed attempt."""

    RETRY = "retry"
    # The caller reports the error: a consumer dead-letters the event, a route fails it.
    GIVE_UP = "give up"


def verdict(error: DeliveryError, attempts: int, config: RetryConfig) -> Verdict:
    """Retry or give up after ``attempts`` failures that counted against the event.

    A permanent failure (the target refused the event) is given up at once; a retriable
    one only when ``config.max_attempts`` is set and used up.
    """
    if not error.retriable:
        return Verdict.GIVE_UP
    if config.max_attempts is not None and attempts >= config.max_attempts:
        return Verdict.GIVE_UP
    return Verdict.RETRY


def backoff_seconds(
    attempt: int, config: RetryConfig, draw: Callable[[], float] = random.random
) -> float:
    """Wait before retry number ``attempt`` (1-based): full jitter over the exponential cap."""
    cap = min(config.max_backoff_seconds, config.initial_backoff_seconds * 2.0 ** (attempt - 1))
    return draw() * cap


def _delay(error: DeliveryError, attempt: int, config: RetryConfig) -> float:
    if error.retry_after is not None:
        return min(max(error.retry_after, 0.0), config.max_retry_after_seconds)
    return backoff_seconds(attempt, config)


class CircuitState(enum.Enum):
    CLOSED = "closed"  # deliveries flow
    OPEN = "open"  # deliveries wait for the next probe
    HALF_OPEN = "half-open"  # one probe is in flight; the others wait for its outcome


class CircuitBreaker:
    """Stops hammering a target that is down.

    After ``threshold`` retriable failures in a row the circuit opens: callers wait instead
    of sending. After the probe interval one caller is let through as a probe (half-open);
    its success closes the circuit and lets every waiting caller go, its failure opens it
    again for twice as long (up to ``max_open_seconds``). Failures seen while the circuit
    is not closed are the target's fault, not the message's: :meth:`record_failure` says
    so, and callers do not count them against a message's attempts. ``delivered`` counts
    the deliveries the target accepted: the evidence that it is up
    (:class:`~proxy.destinations.failing_event.FailingEvent`).
    """

    def __init__(self, config: BreakerConfig | None = None) -> None:
        self.config = config or BreakerConfig()
        self._failures = 0
        self.delivered = 0
        self._open_seconds = self.config.open_seconds
        self._opened_at: float | None = None
        self._probing = False
        self._changed = asyncio.Event()  # set (and replaced) at every change of state

    @property
    def state(self) -> CircuitState:
        if self._opened_at is None:
            return CircuitState.CLOSED
        return CircuitState.HALF_OPEN if self._probing else CircuitState.OPEN

    def seconds_to_probe(self) -> float:
        """How long until the next probe may go (0 when closed or due)."""
        if self._opened_at is None:
            return 0.0
        return max(0.0, self._opened_at + self._open_seconds - time.monotonic())

    async def wait_turn(self) -> bool:
        """Return when a delivery may be tried: True if this caller is the probe (it must
        then report its outcome, or :meth:`release_probe` if it ends without one)."""
        while self._opened_at is not None:
            timeout: float | None = None  # a probe is in flight: wait for its outcome
            if not self._probing:
                timeout = self.seconds_to_probe()
                if timeout <= 0:
                    self._probing = True
                    return True
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout)
        return False

    def release_probe(self) -> None:
        """The probe ended without an answer (cancelled): let another caller probe."""
        if self._probing:
            self._probing = False
            self._notify()

    def record_success(self) -> None:
        self._failures = 0
        if self._opened_at is None:
            return
        log.info("circuit closed: the target answers again")
        self._opened_at = None
        self._probing = False
        self._open_seconds = self.config.open_seconds
        self._notify()

    def record_failure(self) -> bool:
        """Note a retriable failure; True if it counts against the message (circuit closed)."""
        if self._opened_at is not None:
            if self._probing:  # the probe failed: stay open, longer
                self._probing = False
                self._open_seconds = min(self._open_seconds * 2, self.config.max_open_seconds)
                self._opened_at = time.monotonic()
                self._notify()
            return False
        self._failures += 1
        if self._failures >= self.config.threshold:
            log.warning("circuit open: %d failures in a row; pausing deliveries", self._failures)
            self._opened_at = time.monotonic()
            self._notify()
        return True

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


async def deliver_with_retries(
    attempt: Callable[[], Awaitable[T]],
    config: RetryConfig,
    *,
    breaker: CircuitBreaker | None = None,
    on_retry: OnRetry | None = None,
    failing_bound: int | None = None,
    healthy: Callable[[], Awaitable[bool | None]] | None = None,
) -> T:
    """Run ``attempt`` until it succeeds or :func:`verdict` says give up.

    Raises the last :class:`DeliveryError` when giving up. ``on_retry(error, attempt,
    delay)`` is called before each wait (for metrics and logs). While the circuit is open
    the wait is the breaker's probe interval rather than a backoff. With a breaker and
    ``failing_bound``, an event is also given up once ``failing_bound`` of its failures
    came while the target was demonstrably up — it accepted other deliveries, or else
    ``healthy()`` said so (:class:`FailingEvent`); such a failure is the event's, so it
    leaves the breaker as it is (a probe it was is released).
    """
    counted = 0
    event = (
        FailingEvent(breaker, failing_bound)
        if breaker is not None and failing_bound is not None
        else None
    )
    while True:
        # A closed circuit (nearly always) lets the attempt go at once: no coroutine.
        probe = (
            await breaker.wait_turn()
            if breaker is not None and breaker.state is not CircuitState.CLOSED
            else False
        )
        try:
            result = await attempt()
        except DeliveryError as exc:
            events_fault = False
            if not exc.retriable:
                if breaker is not None and not isinstance(exc, Unfit):
                    probe = False
                    breaker.record_success()  # the target answered; the event is at fault
            elif event is not None and await _events_fault(event, healthy):
                assert breaker is not None
                events_fault = True
                counted += 1
                if probe:
                    probe = False
                    breaker.release_probe()  # another caller may show the target works
                if event.used_up:
                    event.give_up(exc)
                    raise
            else:
                probe = False  # its failure is reported: a failed probe reopens the circuit
                if breaker is None or breaker.record_failure():
                    counted += 1
            if verdict(exc, counted, config) is Verdict.GIVE_UP:
                raise
            if (
                breaker is not None
                and not events_fault
                and breaker.state is not CircuitState.CLOSED
                and exc.retry_after is None
            ):
                if on_retry is not None:
                    on_retry(exc, counted, breaker.seconds_to_probe())
                continue  # the breaker paces the next try: wait_turn waits for the probe
            delay = _delay(exc, max(counted, 1), config)
            if on_retry is not None:
                on_retry(exc, counted, delay)
            await asyncio.sleep(delay)
        else:
            if breaker is not None:
                probe = False
                breaker.delivered += 1
                breaker.record_success()
            return result
        finally:
            # The probe ended with no outcome reported: cancelled (a rebalance cancels the
            # deliveries still waiting on a down target) or raised — in the handler above
            # too, while the health check ran (a failed probe's outcome is reported only
            # after it). Unreleased, every other caller would wait for its outcome for ever.
            if probe and breaker is not None:
                breaker.release_probe()


async def _events_fault(
    event: FailingEvent, healthy: Callable[[], Awaitable[bool | None]] | None
) -> bool:
    """Whether this failure of ``event`` counts: other deliveries were accepted since its
    previous failure, or else the target's health check says it is up."""
    if event.failed():
        return True
    if healthy is not None and await healthy():
        event.healthy()
        return True
    return False


class RetryingDestination(Destination):
    """A destination whose deliveries are retried per :class:`RetryConfig` (a wrapper, so
    any destination kind gets the same policy).

    It overrides every capability of :class:`Destination` and passes each to the inner
    destination: a default left in place would silently replace the inner kind's own
    (Kafka's batched ``deliver_many``, its size check, its readiness notes)."""

    def __init__(
        self,
        inner: Destination,
        config: RetryConfig,
        *,
        breaker: CircuitBreaker | None = None,
        on_retry: OnRetry | None = None,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.durable = inner.durable
        self.reads_event = inner.reads_event
        self.config = config
        self.breaker = breaker
        self.on_retry = on_retry
        # Set by a consumer (dead_letter.attempts_while_target_up): see deliver_with_retries.
        self.failing_bound: int | None = None

    def max_payload_bytes(self) -> int | None:
        """The inner destination's payload limit (Kafka learns it at start)."""
        return self.inner.max_payload_bytes()

    def refuses_size(self, event: dict[str, Any], payload: bytes) -> TooLarge | None:
        """The inner destination's size check (Kafka counts its key and headers too)."""
        return self.inner.refuses_size(event, payload)

    async def start(self) -> None:
        await self.inner.start()

    async def deliver(self, event: dict[str, Any], payload: bytes) -> bool | None:
        """The inner delivery's answer (True: held in a local spool), once it succeeded."""
        return await deliver_with_retries(
            lambda: self.inner.deliver(event, payload),
            self.config,
            breaker=self.breaker,
            on_retry=self.on_retry,
            failing_bound=self.failing_bound,
            healthy=self.inner.healthy,
        )

    async def deliver_many(
        self, items: Sequence[tuple[dict[str, Any], bytes]]
    ) -> list[bool | DeliveryError | None]:
        """The inner ``deliver_many`` (Kafka and the archives write many in one go); the
        events it failed retriably are tried again together, per the same policy as one
        event. Per event the inner answer, or its last error once the policy gives up."""
        results: list[bool | DeliveryError | None] = [None] * len(items)
        pending = list(range(len(items)))

        async def attempt() -> None:
            nonlocal pending
            try:
                outcomes = await self.inner.deliver_many([items[i] for i in pending])
            except DeliveryError as exc:
                outcomes = [exc] * len(pending)
            failed: list[int] = []
            for index, outcome in zip(pending, outcomes, strict=True):
                results[index] = outcome
                if isinstance(outcome, DeliveryError) and outcome.retriable:
                    failed.append(index)
            pending = failed
            if failed:
                error = results[failed[0]]
                assert isinstance(error, DeliveryError)
                raise error

        # Giving up leaves each event's last error in ``results``: nothing more to do.
        with contextlib.suppress(DeliveryError):
            await deliver_with_retries(
                attempt, self.config, breaker=self.breaker, on_retry=self.on_retry
            )
        return results

    async def deliver_batch(
        self, events: Sequence[dict[str, Any]], payloads: Sequence[bytes]
    ) -> None:
        """Retry the inner destination's batch (HTTP: one JSON array) as a whole; given up
        like one event (``failing_bound``), a consumer then delivers its events one by one."""
        await deliver_with_retries(
            lambda: self.inner.deliver_batch(events, payloads),
            self.config,
            breaker=self.breaker,
            on_retry=self.on_retry,
            failing_bound=self.failing_bound,
            healthy=self.inner.healthy,
        )

    async def healthy(self) -> bool | None:
        return await self.inner.healthy()

    async def ready(self) -> bool:
        if self.breaker is not None and self.breaker.state is not CircuitState.CLOSED:
            return False
        return await self.inner.ready()

    def circuit(self) -> str | None:
        """This wrapper's breaker state; an inner wrapper's when it has none."""
        return self.inner.circuit() if self.breaker is None else str(self.breaker.state.value)

    def readiness(self) -> dict[str, Any] | None:
        return self.inner.readiness()

    def problem(self) -> str | None:
        return self.inner.problem()

    async def close(self) -> None:
        await self.inner.close()
