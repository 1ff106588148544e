"""Whether each destination can take events now: one place for ``/readyz`` and the
status page.

``ready()`` is each destination's own answer (Kafka: the broker answers or the spool has
room; a destination behind a circuit breaker: the circuit is closed). Destinations that
can say more add a note (Kafka: its spool's depth and age).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proxy.destinations import Destination

__all__ = ["Health", "destination_health"]


@dataclass(frozen=True, slots=True)
class Health:
    ready: bool
    # The circuit breaker's state ("closed", "open", "half-open") for destinations with one.
    circuit: str | None
    details: dict[str, Any] | None


async def destination_health(destinations: Sequence[Destination]) -> dict[str, Health]:
    states = await asyncio.gather(*(d.ready() for d in destinations))
    return {
        d.name: Health(ready, _circuit(d), _note(d))
        for d, ready in zip(destinations, states, strict=True)
    }


def _circuit(destination: Destination) -> str | None:
    breaker = getattr(destination, "breaker", None)
    return None if breaker is None else str(breaker.state.value)


def _note(destination: Destination) -> dict[str, Any] | None:
    note = getattr(destination, "readiness", None)
    return None if note is None else note()
