"""Telling an event the target cannot take from a target that is down.

A consumer retries a retriable failure (5xx, timeout, connection refused) until the target
takes the event: when the target is down that is right, and nothing may be dead-lettered.
But some events a target answers with a 5xx for ever (Marquez 0.50's ``runUuid``
NullPointerException, a string PostgreSQL refuses): retried for ever they block their
run's lane and may be stored half-way at each attempt.

The rule (docs/consumers/dlq.md): a failed attempt of an event *counts* when the target
is demonstrably up — it accepted another delivery after this event's previous attempt
failed (for the first attempt: after it was sent), or, when it did not, the target's
health check (:meth:`~proxy.destinations.base.Destination.healthy`, asked after this
failure) answered that it is up. The event is given up (dead-lettered) once ``bound``
attempts counted. A down target accepts nothing and fails its health check, so no attempt
counts however long it lasts; nor does a refusal of another event (a 422 is answered
before any database write, so it does not show that the target can store events).
"""

from __future__ import annotations

from typing import Protocol

from proxy.destinations.base import DeliveryError

__all__ = ["Deliveries", "FailingEvent"]

# How much of the target's last answer the reason quotes (the dead letter's
# dlq_response_excerpt header holds more).
_QUOTED = 200


class Deliveries(Protocol):
    """What counts the deliveries the target accepted, shared by everything delivering to
    it (the circuit breaker): the evidence that it is up."""

    delivered: int


class FailingEvent:
    """One event's failed attempts; which of them counted, and when to give it up."""

    __slots__ = ("_count", "_seen", "attempts", "bound", "counted")

    def __init__(self, count: Deliveries, bound: int) -> None:
        self._count = count
        self._seen = count.delivered
        self.bound = bound
        self.attempts = 0
        self.counted = 0

    def failed(self) -> bool:
        """Note a retriable failure of this event; True when it counts because the target
        accepted another delivery since this event's previous failure."""
        self.attempts += 1
        delivered = self._count.delivered
        counts = delivered > self._seen
        self._seen = delivered
        self.counted += counts
        return counts

    def healthy(self) -> None:
        """The target's health check said it is up after the last failure: it counts."""
        self.counted += 1

    @property
    def used_up(self) -> bool:
        return self.counted >= self.bound

    def give_up(self, error: DeliveryError) -> None:
        """Say in ``error`` (the target's last answer; its status and excerpt stay for the
        dead letter's headers) why it is final, before the caller raises it."""
        excerpt = getattr(error, "excerpt", "")
        answer = error.reason + (f": {excerpt[:_QUOTED]}" if excerpt else "")
        error.reason = (
            f"the target failed this event {self.counted} times while it took others "
            f"({self.attempts} attempts); last answer {answer}"
        )
        error.args = (f"{error.destination}: {error.reason}",)
