"""The contract every destination kind fulfils."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

__all__ = [
    "DeliveryError",
    "Destination",
    "TooLarge",
    "Unfit",
]


class DeliveryError(Exception):
    """A destination did not take an event. ``retriable`` says whether trying later may work."""

    def __init__(
        self,
        destination: str,
        reason: str,
        *,
        retriable: bool,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{destination}: {reason}")
        self.destination = destination
        self.reason = reason
        self.retriable = retriable
        # Seconds the destination asked us to wait before trying again (HTTP Retry-After).
        self.retry_after = retry_after


class TooLarge(DeliveryError):
    """The event is larger than a durable destination takes; found before any write."""

    def __init__(
        self,
        destination: str,
        size: int,
        limit: int,
        *,
        pointer: str = "",
        what: str = "the event",
    ) -> None:
        super().__init__(
            destination, f"{what} is {size} bytes, this destination takes {limit}", retriable=False
        )
        self.size = size
        self.limit = limit
        # The field to shorten (JSON pointer; "" for the event as a whole).
        self.pointer = pointer
        # What was measured: "the event", or the message with its key and headers.
        self.what = what


class Unfit(DeliveryError):
    """The target cannot take this event, known to its adapter before sending (Marquez
    0.50 and a JobEvent): nothing was sent, so it says nothing about the target's health."""

    def __init__(self, destination: str, reason: str) -> None:
        super().__init__(destination, reason, retriable=False)


class Destination(abc.ABC):
    """A place events are delivered to, with a lifetime (start → deliver* → close).

    Every capability a caller may use is declared here, with the answer of a destination
    that lacks it as the default: callers call, they never probe with ``getattr``, and a
    wrapper (:class:`~proxy.destinations.retry.RetryingDestination`) overrides every one
    of them so that wrapping never silently drops a capability."""

    name: str
    # True when a delivery is durable (Kafka, archive): the client's 2xx waits for it.
    durable: bool
    # Whether ``deliver`` uses the event dict or only the payload bytes (HTTP sends them
    # as they are): a caller holding only bytes (a consumer) then need not build the dict.
    reads_event: bool = True

    @abc.abstractmethod
    async def start(self) -> None:
        """Open connections and files; called once before the first delivery."""

    @abc.abstractmethod
    async def deliver(self, event: dict[str, Any], payload: bytes) -> bool | None:
        """Return once the destination holds ``payload`` (the serialized ``event``);
        True when it holds it in a local spool on its way (Kafka during an outage)."""

    async def deliver_many(
        self, items: Sequence[tuple[dict[str, Any], bytes]]
    ) -> Sequence[bool | DeliveryError | None]:
        """Deliver ``(event, payload)`` pairs, each failing alone: per pair the answer
        ``deliver`` would give, or its :class:`DeliveryError`. Kinds that write many in
        one go (Kafka, archives) override it; the default delivers each at once."""
        # Imported here: this module stays free of asyncio for the pure config modules.
        from proxy.destinations.deliver_each import deliver_each

        return await deliver_each(self.deliver, items)

    async def deliver_batch(
        self, events: Sequence[dict[str, Any]], payloads: Sequence[bytes]
    ) -> None:
        """Deliver a batch as a whole (a consumer's ``batch_max_events``): raise the
        :class:`DeliveryError` of the first event refused. Kinds whose target takes an
        array in one request (HTTP, object archive) override it."""
        for event, payload in zip(events, payloads, strict=True):
            await self.deliver(event, payload)

    def max_payload_bytes(self) -> int | None:
        """Largest payload this destination takes, when it has a limit (Kafka's message
        size, learnt at start); None for no limit."""
        return None

    def refuses_size(self, event: dict[str, Any], payload: bytes) -> TooLarge | None:
        """Why this destination could never take this event, or None; known before any
        write. Kafka counts the key and headers that repeat fields of the event too."""
        limit = self.max_payload_bytes()
        return TooLarge(self.name, len(payload), limit) if limit and len(payload) > limit else None

    async def healthy(self) -> bool | None:
        """Whether the target itself says it is up (an HTTP target's health check), or
        None when it has no such check: tells an event the target cannot take from a
        target that is down (proxy/destinations/failing_event.py)."""
        return None

    @abc.abstractmethod
    async def ready(self) -> bool:
        """Whether the destination can take events right now (for /readyz)."""

    def circuit(self) -> str | None:
        """The state of the circuit breaker in front of it (retry), or None without one."""
        return None

    def readiness(self) -> dict[str, Any] | None:
        """Details for /readyz and the status page (Kafka: its spool), or None."""
        return None

    def problem(self) -> str | None:
        """What is wrong, in words an operator can act on, or None."""
        return None

    @abc.abstractmethod
    async def close(self) -> None:
        """Finish in-flight deliveries, then release resources (callers bound the wait)."""
