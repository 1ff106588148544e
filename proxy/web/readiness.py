"""Whether each destination can take events now: one place for ``/readyz`` and the
status page.

``ready()`` is each destination's own answer (Kafka: the broker answers, or it answered
once since start and the spool has room; a destination behind a circuit breaker: the
circuit is closed). Destinations that can say more add a note (Kafka: its spool's depth
and age) and, when something is wrong, a ``problem`` in words (Kafka: since when it has
not answered, where the events are, what to check). A destination that is ready with a
problem makes the proxy *degraded*: it still takes events, but not as it should.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proxy.destinations import Destination

__all__ = ["Health", "destination_health", "overall_status"]


@dataclass(frozen=True, slots=True)
class Health:
    ready: bool
    # The circuit breaker's state ("closed", "open", "half-open") for destinations with one.
    circuit: str | None
    details: dict[str, Any] | None
    # What is wrong, in words an operator can act on (None: nothing).
    problem: str | None = None


async def destination_health(destinations: Sequence[Destination]) -> dict[str, Health]:
    states = await asyncio.gather(*(d.ready() for d in destinations))
    return {
        d.name: Health(ready, d.circuit(), d.readiness(), d.problem())
        for d, ready in zip(destinations, states, strict=True)
    }


def overall_status(health: Sequence[Health]) -> tuple[str, list[str]]:
    """``ready``, ``degraded`` (every one ready, some with a problem) or ``not_ready``,
    and the distinct problems (several destinations share one Kafka)."""
    problems = list(dict.fromkeys(h.problem for h in health if h.problem))
    if not all(h.ready for h in health):
        return "not_ready", problems
    return ("degraded" if problems else "ready"), problems
