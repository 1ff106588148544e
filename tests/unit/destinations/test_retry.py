"""Backoff with full jitter, the retry policy (retry or give up), the retry loop and the
circuit breaker."""

from __future__ import annotations

import asyncio

import pytest

from proxy.destinations import DeliveryError, Destination
from proxy.destinations.base import Unfit
from proxy.destinations.retry import (
    BreakerConfig,
    CircuitBreaker,
    CircuitState,
    RetryConfig,
    RetryingDestination,
    Verdict,
    backoff_seconds,
    deliver_with_retries,
    verdict,
)

FAST = RetryConfig(max_attempts=4, initial_backoff_seconds=0.001, max_backoff_seconds=0.004)
RETRIABLE = DeliveryError("t", "HTTP 503", retriable=True)
REFUSED = DeliveryError("t", "HTTP 400", retriable=False)


def breaker(threshold: int, open_seconds: float, max_open_seconds: float = 5.0) -> CircuitBreaker:
    return CircuitBreaker(
        BreakerConfig(
            threshold=threshold, open_seconds=open_seconds, max_open_seconds=max_open_seconds
        )
    )


@pytest.mark.parametrize("attempts", [1, 4, 5, 50, 10**6])
def test_until_delivered_never_gives_up_on_a_retriable_failure(attempts):
    # What a consumer uses: however long the outage, no dead-letter decision.
    assert verdict(RETRIABLE, attempts, RetryConfig().until_delivered()) is Verdict.RETRY


@pytest.mark.parametrize("attempts", [0, 1, 10**6])
def test_a_refused_event_is_given_up_at_once(attempts):
    assert verdict(REFUSED, attempts, RetryConfig().until_delivered()) is Verdict.GIVE_UP
    assert verdict(REFUSED, attempts, FAST) is Verdict.GIVE_UP


def test_a_route_gives_up_on_retriable_failures_after_max_attempts():
    assert FAST.max_attempts is not None
    assert verdict(RETRIABLE, FAST.max_attempts - 1, FAST) is Verdict.RETRY
    assert verdict(RETRIABLE, FAST.max_attempts, FAST) is Verdict.GIVE_UP


def test_default_backoff_and_probe_interval_are_capped_at_5_seconds():
    # A target that is back gets traffic again within seconds, however long it was down.
    assert backoff_seconds(100, RetryConfig(), lambda: 1.0) == 5.0
    down = CircuitBreaker()
    for _ in range(down.config.threshold):
        down.record_failure()
    for _ in range(20):  # twenty failed probes: the interval stops doubling at the cap
        down._probing = True
        down.record_failure()
    assert down._open_seconds == 5.0 and down.seconds_to_probe() <= 5.0


def test_probe_interval_cap_is_configurable_and_checked():
    assert BreakerConfig(open_seconds=0.5, max_open_seconds=2).max_open_seconds == 2
    with pytest.raises(ValueError, match="open_seconds"):
        BreakerConfig(open_seconds=10, max_open_seconds=5)


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
    down = breaker(threshold=2, open_seconds=0.01, max_open_seconds=0.02)
    # 12 failures in a row would exhaust 4 attempts; with the breaker open, only the
    # failures before it opened count against the message.
    attempt = Flaky(12, DeliveryError("t", "down", retriable=True))
    assert await deliver_with_retries(attempt, FAST, breaker=down) == "ok"
    assert attempt.calls == 13
    assert down.state is CircuitState.CLOSED


async def test_the_failure_that_opens_the_circuit_does_not_give_up_the_event():
    # Issue 13: threshold == max_attempts, one caller: its 5th failure opened the circuit
    # and used up its attempts at once, and the event was dead-lettered.
    # A consumer's policy never gives up on a retriable failure, whatever opens.
    config = RetryConfig(initial_backoff_seconds=0.001).until_delivered()
    down = breaker(threshold=5, open_seconds=0.01, max_open_seconds=0.02)
    attempt = Flaky(8, RETRIABLE)
    assert await deliver_with_retries(attempt, config, breaker=down) == "ok"
    assert attempt.calls == 9


async def test_until_delivered_outlasts_any_number_of_retriable_failures():
    config = FAST.until_delivered()
    attempt = Flaky(60, RETRIABLE)
    assert await deliver_with_retries(attempt, config) == "ok"
    assert attempt.calls == 61
    refused = Flaky(60, REFUSED)
    with pytest.raises(DeliveryError, match="400"):
        await deliver_with_retries(refused, config, breaker=breaker(1, 0.01))
    assert refused.calls == 1


async def test_while_open_the_breaker_paces_tries_instead_of_the_backoff():
    # A slow backoff would keep a recovered target waiting; the probe interval does not.
    slow = RetryConfig(initial_backoff_seconds=60, max_backoff_seconds=60).until_delivered()
    down = breaker(threshold=1, open_seconds=0.01, max_open_seconds=0.02)
    delays: list[float] = []
    attempt = Flaky(3, RETRIABLE)
    retries = deliver_with_retries(
        attempt, slow, breaker=down, on_retry=lambda e, n, d: delays.append(d)
    )
    result = await asyncio.wait_for(retries, 5)
    assert result == "ok" and all(d <= 0.02 for d in delays)


async def _cancel_then_probe_again(probe: asyncio.Task[str], down: CircuitBreaker) -> None:
    """Cancel ``probe`` (the half-open breaker's probe): the breaker is open again and the
    next caller gets through as its probe."""
    assert down.state is CircuitState.HALF_OPEN
    probe.cancel()
    await asyncio.gather(probe, return_exceptions=True)
    assert down.state is CircuitState.OPEN
    next_caller = deliver_with_retries(Flaky(0, RETRIABLE), FAST, breaker=down)
    assert await asyncio.wait_for(next_caller, 1) == "ok"


async def test_a_cancelled_probe_lets_another_caller_probe():
    down = breaker(threshold=1, open_seconds=0.01)
    down.record_failure()
    hanging = asyncio.Event()

    async def never_answers() -> str:
        await hanging.wait()
        return "late"

    probe = asyncio.create_task(deliver_with_retries(never_answers, FAST, breaker=down))
    await asyncio.sleep(0.05)
    await _cancel_then_probe_again(probe, down)


async def test_a_probe_cancelled_during_its_health_check_lets_another_caller_probe():
    """A failed probe's outcome is reported only after the health check that says whether
    the failure was the event's; cancelled meanwhile (a rebalance cancels the deliveries
    waiting on a down target), it must still let go of the probe. Seen in
    test_rebalance_while_the_target_is_down_hands_waiting_events_over_once: the old
    owner's breaker stayed half-open for ever and its partitions were never delivered."""
    down = breaker(threshold=1, open_seconds=0.01)
    down.record_failure()
    checking = asyncio.Event()

    async def down_health() -> bool:
        checking.set()
        await asyncio.Event().wait()  # a slow health check: cancelled before it answers
        return False

    probe = asyncio.create_task(
        deliver_with_retries(
            Flaky(1, RETRIABLE),
            FAST.until_delivered(),
            breaker=down,
            failing_bound=5,
            healthy=down_health,
        )
    )
    await asyncio.wait_for(checking.wait(), 1)
    await _cancel_then_probe_again(probe, down)


async def test_a_probe_the_adapter_finds_unfit_lets_another_caller_probe():
    # Unfit says nothing about the target: the probe is released, not reported.
    down = breaker(threshold=1, open_seconds=0.01)
    down.record_failure()
    with pytest.raises(Unfit):
        await deliver_with_retries(Flaky(1, Unfit("t", "a JobEvent")), FAST, breaker=down)
    assert down.state is CircuitState.OPEN
    next_caller = deliver_with_retries(Flaky(0, RETRIABLE), FAST, breaker=down)
    assert await asyncio.wait_for(next_caller, 1) == "ok"


async def test_open_breaker_holds_other_callers_until_the_probe_succeeds():
    down = breaker(threshold=1, open_seconds=0.05)
    assert down.record_failure() is True
    assert down.state is CircuitState.OPEN
    waiter = asyncio.create_task(down.wait_turn())
    await asyncio.sleep(0.1)  # past open_seconds: the waiter becomes the probe
    assert await asyncio.wait_for(waiter, 1) is True
    assert down.state is CircuitState.HALF_OPEN
    second = asyncio.create_task(down.wait_turn())
    await asyncio.sleep(0.02)
    assert not second.done()  # one probe at a time
    down.record_success()
    assert await asyncio.wait_for(second, 1) is False
    assert down.state is CircuitState.CLOSED


def test_failed_probe_reopens_for_longer():
    down = breaker(threshold=1, open_seconds=1, max_open_seconds=3)
    down.record_failure()
    down._probing = True  # as wait_turn sets it for the probe
    assert down.record_failure() is False
    assert down.state is CircuitState.OPEN and down._open_seconds == 2


class SpoolingKafkaLike(Destination):
    """A destination with a payload limit that answers "held in the local spool"."""

    name = "k"
    durable = True

    def max_payload_bytes(self) -> int | None:
        return 1000

    async def start(self) -> None: ...

    async def deliver(self, event, payload) -> bool:
        return True

    async def ready(self) -> bool:
        return True

    async def close(self) -> None: ...


async def test_the_retry_wrapper_keeps_the_payload_limit_and_the_spooled_answer():
    wrapped = RetryingDestination(SpoolingKafkaLike(), FAST)
    assert wrapped.max_payload_bytes() == 1000
    assert await wrapped.deliver({}, b"{}") is True
