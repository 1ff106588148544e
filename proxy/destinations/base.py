"""The contract every destination kind fulfils."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["DeliveryError", "Destination"]


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


@runtime_checkable
class Destination(Protocol):
    """A place events are delivered to, with a lifetime (start → deliver* → close)."""

    name: str
    # True when a delivery is durable (Kafka, archive): the client's 2xx waits for it.
    durable: bool

    async def start(self) -> None: ...

    async def deliver(self, event: dict[str, Any], payload: bytes) -> None:
        """Return once the destination holds ``payload`` (the serialized ``event``)."""

    async def ready(self) -> bool:
        """Whether the destination can take events right now (for /readyz)."""

    async def close(self) -> None:
        """Finish in-flight deliveries, then release resources (callers bound the wait)."""
