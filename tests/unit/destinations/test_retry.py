"""Backoff with full jitter, the retry loop and the circuit breaker."""

from __future__ import annotations

import asyncio

import pytest

from proxy.destinations import DeliveryError
from proxy.destinations.retry import (
    CircuitBreaker,
    RetryConfig,
    backoff_seconds,
    deliver_with_retries,
)

FAST = RetryConfig(max_attempts=4, initial_backoff_seconds=0.001, max_backoff_seconds=0.004)


def test_backoff_is_full_jitter_under_an_exponential_cap():
    config = RetryConfig(initial_backoff_seconds=0.5, max_backoff_seconds=3)
    assert [backoff_seconds(n, config, lambda: 1.0) for n in (1, 2, 3, 4, 5)] == [
        0.5,
        1.0,
        2.0,
        3.0,
        3.0,
    ]
    assert backoff_seconds(3, config, lambda: 0.0) == 0.0
    assert backoff_seconds(2, config, lambda: 0.5) == 0.5


class Flaky:
    """Fails ``failures`` times with ``error``, then returns "ok"."""

    def __init__(self, failures: int, error: DeliveryError) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "ok"


async def test_retriable_errors_are_retried_until_success():
    attempt = Flaky(3, DeliveryError("t", "503", retriable=True))
    retries: list[int] = []
    result = await deliver_with_retries(attempt, FAST, on_retry=lambda e, n, d: retries.append(n))
    assert result == "ok" and attempt.calls == 4 and retries == [1, 2, 3]


async def test_retries_stop_at_max_attempts_with_the_last_error():
    attempt = Flaky(10, DeliveryError("t", "503", retriable=True))
    with pytest.raises(DeliveryError, match="503"):
        await deliver_with_retries(attempt, FAST)
    assert attempt.calls == FAST.max_attempts


async def test_permanent_errors_are_not_retried():
    attempt = Flaky(10, DeliveryError("t", "422", retriable=False))
    with pytest.raises(DeliveryError):
        await deliver_with_retries(attempt, FAST)
    assert attempt.calls == 1


async def test_retry_after_is_honoured_and_capped():
    config = FAST.model_copy(update={"max_retry_after_seconds": 0.01})
    delays: list[float] = []
    attempt = Flaky(2, DeliveryError("t", "429", retriable=True, retry_after=120))
    await deliver_with_retries(attempt, config, on_retry=lambda e, n, d: delays.append(d))
    assert delays == [0.01, 0.01]


async def test_breaker_opens_after_threshold_and_outage_does_not_use_up_attempts():
    breaker = CircuitBreaker(threshold=2, open_seconds=0.01, max_open_seconds=0.02)
    # 12 failures in a row would exhaust 4 attempts; with the breaker open, only the
    # failures before it opened count against the message.
    attempt = Flaky(12, DeliveryError("t", "down", retriable=True))
    assert await deliver_with_retries(attempt, FAST, breaker=breaker) == "ok"
    assert attempt.calls == 13
    assert breaker.state == "closed"


async def test_open_breaker_holds_other_callers_until_the_probe_succeeds():
    breaker = CircuitBreaker(threshold=1, open_seconds=0.05)
    assert breaker.record_failure() is True
    assert breaker.state == "open"
    waiter = asyncio.create_task(breaker.wait_turn())
    await asyncio.sleep(0.1)  # past open_seconds: the waiter becomes the probe
    await asyncio.wait_for(waiter, 1)
    assert breaker.state == "half-open"
    second = asyncio.create_task(breaker.wait_turn())
    await asyncio.sleep(0.02)
    assert not second.done()  # one probe at a time
    breaker.record_success()
    await asyncio.wait_for(second, 1)
    assert breaker.state == "closed"


def test_failed_probe_reopens_for_longer():
    breaker = CircuitBreaker(threshold=1, open_seconds=1, max_open_seconds=3)
    breaker.record_failure()
    breaker._probing = True  # as wait_turn sets it for the probe
    assert breaker.record_failure() is False
    assert breaker.state == "open" and breaker._open_seconds == 2
