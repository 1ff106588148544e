"""The retry wrapper passes every capability of the destination contract through.

A capability the wrapper does not override falls back to the contract's default, which is
the answer of a destination *without* it: a Kafka or archive route with ``retry:`` would
then write events one by one instead of in one go, lose its size check or its readiness
notes, silently. Each test here asks the wrapper for one capability of an inner
destination whose answer differs from the default."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import pytest

from proxy.destinations import DeliveryError, Destination, TooLarge
from proxy.destinations.retry import CircuitBreaker, RetryConfig, RetryingDestination

FAST = RetryConfig(max_attempts=3, initial_backoff_seconds=0.001, max_backoff_seconds=0.002)


class CapableDouble(Destination):
    """A destination with every capability, each answering unlike the default; it records
    how it was called. ``fail_first`` names events whose first delivery fails retriably;
    ``refuse`` names events it refuses for good."""

    name = "capable"
    durable = True
    reads_event = False

    def __init__(
        self, fail_first: frozenset[str] = frozenset(), refuse: frozenset[str] = frozenset()
    ) -> None:
        self.fail_first = set(fail_first)
        self.refuse = refuse
        self.many_calls: list[list[str]] = []
        self.batches: list[list[bytes]] = []
        self.singles = 0

    async def start(self) -> None: ...

    async def deliver(self, event: dict[str, Any], payload: bytes) -> bool:
        self.singles += 1
        return True

    async def deliver_many(
        self, items: Sequence[tuple[dict[str, Any], bytes]]
    ) -> list[bool | DeliveryError | None]:
        names = [event["id"] for event, _ in items]
        self.many_calls.append(names)
        answers: list[bool | DeliveryError | None] = []
        for name in names:
            if name in self.refuse:
                answers.append(DeliveryError(self.name, f"{name} refused", retriable=False))
            elif name in self.fail_first:
                self.fail_first.discard(name)
                answers.append(DeliveryError(self.name, f"{name} not yet", retriable=True))
            else:
                answers.append(True)
        return answers

    async def deliver_batch(
        self, events: Sequence[dict[str, Any]], payloads: Sequence[bytes]
    ) -> None:
        self.batches.append(list(payloads))

    def max_payload_bytes(self) -> int | None:
        return 1000

    def refuses_size(self, event: dict[str, Any], payload: bytes) -> TooLarge | None:
        return TooLarge(self.name, 7, 5, pointer="/job/name")

    async def ready(self) -> bool:
        return True

    def circuit(self) -> str | None:
        return "inner-circuit"

    def readiness(self) -> dict[str, Any] | None:
        return {"spool": "inner"}

    def problem(self) -> str | None:
        return "inner problem"

    async def close(self) -> None: ...


def _items(*names: str) -> list[tuple[dict[str, Any], bytes]]:
    return [({"id": name}, name.encode()) for name in names]


def test_the_wrapper_overrides_every_capability_of_the_contract():
    capabilities = {
        name
        for name, member in inspect.getmembers(Destination)
        if not name.startswith("_") and callable(member)
    }
    assert capabilities >= {"deliver_many", "deliver_batch", "refuses_size", "readiness"}
    inherited = sorted(c for c in capabilities if c not in vars(RetryingDestination))
    assert inherited == []


async def test_deliver_many_goes_to_the_inner_deliver_many_in_one_call():
    inner = CapableDouble()
    answers = await RetryingDestination(inner, FAST).deliver_many(_items("a", "b", "c"))
    assert inner.many_calls == [["a", "b", "c"]] and inner.singles == 0
    assert answers == [True, True, True]


async def test_deliver_many_retries_only_the_events_that_failed_retriably():
    inner = CapableDouble(fail_first=frozenset({"b"}), refuse=frozenset({"c"}))
    answers = await RetryingDestination(inner, FAST).deliver_many(_items("a", "b", "c"))
    assert inner.many_calls == [["a", "b", "c"], ["b"]]
    assert answers[:2] == [True, True]
    assert isinstance(answers[2], DeliveryError) and not answers[2].retriable


async def test_deliver_many_answers_the_last_error_once_the_policy_gives_up():
    inner = CapableDouble(refuse=frozenset())

    async def always_down(
        items: Sequence[tuple[dict[str, Any], bytes]],
    ) -> list[bool | DeliveryError | None]:
        inner.many_calls.append([event["id"] for event, _ in items])
        return [DeliveryError("capable", "down", retriable=True) for _ in items]

    inner.deliver_many = always_down  # type: ignore[method-assign]
    answers = await RetryingDestination(inner, FAST).deliver_many(_items("a", "b"))
    assert len(inner.many_calls) == FAST.max_attempts
    assert all(isinstance(a, DeliveryError) and a.retriable for a in answers)


async def test_deliver_batch_goes_to_the_inner_deliver_batch():
    inner = CapableDouble()
    await RetryingDestination(inner, FAST).deliver_batch([{"id": "a"}, {"id": "b"}], [b"a", b"b"])
    assert inner.batches == [[b"a", b"b"]] and inner.singles == 0


def test_the_size_limit_and_the_size_check_are_the_inner_ones():
    wrapped = RetryingDestination(CapableDouble(), FAST)
    assert wrapped.max_payload_bytes() == 1000
    refusal = wrapped.refuses_size({"id": "a"}, b"a")
    assert refusal is not None and refusal.pointer == "/job/name"


def test_reads_event_readiness_and_problem_are_the_inner_ones():
    wrapped = RetryingDestination(CapableDouble(), FAST)
    assert wrapped.reads_event is False
    assert wrapped.readiness() == {"spool": "inner"}
    assert wrapped.problem() == "inner problem"


@pytest.mark.parametrize("with_breaker", [False, True])
def test_the_circuit_is_the_wrappers_breaker_else_the_inner_one(with_breaker: bool):
    breaker = CircuitBreaker() if with_breaker else None
    wrapped = RetryingDestination(CapableDouble(), FAST, breaker=breaker)
    assert wrapped.circuit() == ("closed" if with_breaker else "inner-circuit")
