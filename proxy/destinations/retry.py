"""Retrying a delivery: exponential backoff with full jitter, and a circuit breaker.

Written once and used by both sides of the flow: the consumer daemons retry a message
before giving up on it (dead-letter topic), and the proxy's routing side wraps an HTTP
destination the same way. A destination says *whether* an error is worth retrying
(:attr:`DeliveryError.retriable`) and may ask for a wait (``retry_after``, from HTTP
``Retry-After``); this module decides *how long* to wait and *when* to give up.

Backoff is "full jitter": a uniform draw in ``[0, min(cap, initial * 2**n)]``, so that many
consumers hitting the same recovering target do not retry in lockstep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from proxy.destinations.base import DeliveryError, Destination

__all__ = [
    "CircuitBreaker",
    "OnRetry",
    "RetryConfig",
    "RetryingDestination",
    "backoff_seconds",
    "deliver_with_retries",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
OnRetry = Callable[[DeliveryError, int, float], None]


class RetryConfig(BaseModel):
    """How often and how patiently a failed delivery is tried again."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Attempts in total, the first included; 1 means "never retry".
    max_attempts: Annotated[int, Field(ge=1)] = 5
    initial_backoff_seconds: Annotated[float, Field(gt=0)] = 0.5
    max_backoff_seconds: Annotated[float, Field(gt=0)] = 30.0
    # A target's Retry-After is honoured up to this many seconds.
    max_retry_after_seconds: Annotated[float, Field(ge=0)] = 300.0


def backoff_seconds(
    attempt: int, config: RetryConfig, draw: Callable[[], float] = random.random
) -> float:
    """Wait before retry number ``attempt`` (1-based): full jitter over the exponential cap."""
    cap = min(config.max_backoff_seconds, config.initial_backoff_seconds * 2 ** (attempt - 1))
    return draw() * cap


def _delay(error: DeliveryError, attempt: int, config: RetryConfig) -> float:
    if error.retry_after is not None:
        return min(max(error.retry_after, 0.0), config.max_retry_after_seconds)
    return backoff_seconds(attempt, config)


class CircuitBreaker:
    """Stops hammering a target that is down.

    After ``threshold`` retriable failures in a row the circuit opens: callers wait instead
    of sending. After ``open_seconds`` one caller is let through as a probe (half-open);
    its success closes the circuit, its failure opens it again for twice as long (up to
    ``max_open_seconds``). Failures seen while the circuit is not closed are the target's
    fault, not the message's: :meth:`record_failure` says so, and callers do not count
    them against a message's attempts — a long outage delays events, it does not
    dead-letter them.
    """

    def __init__(
        self, threshold: int = 5, open_seconds: float = 1.0, max_open_seconds: float = 60.0
    ) -> None:
        self.threshold = threshold
        self.base_open_seconds = open_seconds
        self.max_open_seconds = max_open_seconds
        self._failures = 0
        self._open_seconds = open_seconds
        self._opened_at: float | None = None
        self._probing = False
        self._closed = asyncio.Event()
        self._closed.set()

    @property
    def state(self) -> str:
        if self._opened_at is None:
            return "closed"
        return "half-open" if self._probing else "open"

    async def wait_turn(self) -> None:
        """Return when a delivery may be tried: circuit closed, or this caller is the probe."""
        while self._opened_at is not None:
            remaining = self._opened_at + self._open_seconds - time.monotonic()
            if remaining <= 0 and not self._probing:
                self._probing = True
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closed.wait(), max(remaining, 0.001))

    def record_success(self) -> None:
        self._failures = 0
        if self._opened_at is not None:
            log.info("circuit closed: the target answers again")
        self._opened_at = None
        self._probing = False
        self._open_seconds = self.base_open_seconds
        self._closed.set()

    def record_failure(self) -> bool:
        """Note a retriable failure; True if it counts against the message (circuit closed)."""
        if self._opened_at is not None:
            if self._probing:  # the probe failed: stay open, longer
                self._probing = False
                self._open_seconds = min(self._open_seconds * 2, self.max_open_seconds)
                self._opened_at = time.monotonic()
            return False
        self._failures += 1
        if self._failures >= self.threshold:
            log.warning("circuit open: %d failures in a row; pausing deliveries", self._failures)
            self._opened_at = time.monotonic()
            self._closed.clear()
        return True


async def deliver_with_retries(
    attempt: Callable[[], Awaitable[T]],
    config: RetryConfig,
    *,
    breaker: CircuitBreaker | None = None,
    on_retry: OnRetry | None = None,
) -> T:
    """Run ``attempt`` until it succeeds, fails permanently, or uses up its attempts.

    Raises the last :class:`DeliveryError`. ``on_retry(error, attempt, delay)`` is called
    before each wait (for metrics and logs).
    """
    counted = 0
    while True:
        if breaker is not None:
            await breaker.wait_turn()
        try:
            result = await attempt()
        except DeliveryError as exc:
            if not exc.retriable:
                if breaker is not None:
                    breaker.record_success()  # the target answered; the event is at fault
                raise
            if breaker is None or breaker.record_failure():
                counted += 1
            if counted >= config.max_attempts:
                raise
            delay = _delay(exc, counted, config)
            if on_retry is not None:
                on_retry(exc, counted, delay)
            await asyncio.sleep(delay)
        else:
            if breaker is not None:
                breaker.record_success()
            return result


class RetryingDestination:
    """A destination whose deliveries are retried per :class:`RetryConfig` (a wrapper, so
    any destination kind gets the same policy)."""

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
        self.config = config
        self.breaker = breaker
        self.on_retry = on_retry

    async def start(self) -> None:
        await self.inner.start()

    async def deliver(self, event: dict[str, Any], payload: bytes) -> None:
        await deliver_with_retries(
            lambda: self.inner.deliver(event, payload),
            self.config,
            breaker=self.breaker,
            on_retry=self.on_retry,
        )

    async def deliver_batch(
        self, events: Sequence[dict[str, Any]], payloads: Sequence[bytes]
    ) -> None:
        """Retry a whole batch; only for inner destinations that take batches."""
        deliver_batch = self.inner.deliver_batch  # type: ignore[attr-defined]
        await deliver_with_retries(
            lambda: deliver_batch(events, payloads),
            self.config,
            breaker=self.breaker,
            on_retry=self.on_retry,
        )

    async def ready(self) -> bool:
        if self.breaker is not None and self.breaker.state != "closed":
            return False
        return await self.inner.ready()

    async def close(self) -> None:
        await self.inner.close()
