"""The contract every destination kind fulfils."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = [
    "DeliveryError",
    "Destination",
    "TooLarge",
    "payload_limit",
    "reads_event",
    "size_refusal",
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


def payload_limit(destination: Destination) -> int | None:
    """Largest payload ``destination`` takes, when it has a limit (Kafka's message size).

    An optional attribute rather than part of the protocol: most kinds have no limit."""
    limit = getattr(destination, "max_payload_bytes", None)
    return limit if isinstance(limit, int) else None


def size_refusal(
    destination: Destination, event: dict[str, Any], payload: bytes
) -> TooLarge | None:
    """Why ``destination`` could never take this event, or None; known before any write.

    A destination that wraps the payload (Kafka: a key and headers that repeat fields of
    the event) says so with a ``refuses_size(event, payload)`` method; else its plain
    ``max_payload_bytes`` limit, if any, applies to the payload."""
    refuses = getattr(destination, "refuses_size", None)
    if refuses is not None:
        refusal: TooLarge | None = refuses(event, payload)
        return refusal
    limit = payload_limit(destination)
    return (
        TooLarge(destination.name, len(payload), limit) if limit and len(payload) > limit else None
    )


def reads_event(destination: Destination) -> bool:
    """Whether ``destination`` uses the event dict its ``deliver`` is given, or only the
    payload bytes (HTTP sends them as they are; ``reads_event = False`` says so). A caller
    holding only bytes (a consumer) then need not build the dict.

    An optional attribute rather than part of the protocol: most kinds read the event."""
    return getattr(destination, "reads_event", True) is not False


@runtime_checkable
class Destination(Protocol):
    """A place events are delivered to, with a lifetime (start → deliver* → close)."""

    name: str
    # True when a delivery is durable (Kafka, archive): the client's 2xx waits for it.
    durable: bool

    async def start(self) -> None: ...

    async def deliver(self, event: dict[str, Any], payload: bytes) -> bool | None:
        """Return once the destination holds ``payload`` (the serialized ``event``);
        True when it holds it in a local spool on its way (Kafka during an outage)."""

    async def ready(self) -> bool:
        """Whether the destination can take events right now (for /readyz)."""

    async def close(self) -> None:
        """Finish in-flight deliveries, then release resources (callers bound the wait)."""
