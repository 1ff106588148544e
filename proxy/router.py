"""The seam between "this event is valid" and "these destinations get it".

The proxy asks a :class:`Router` where an event goes; the rule engine in
``routing_rules/`` (:class:`routing_rules.router.RulesRouter`) is the implementation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from proxy.destinations import Destination

__all__ = ["Route", "Router"]


@dataclass(frozen=True, slots=True)
class Route:
    """Where one event goes, and the event as it should be sent (rules may transform it)."""

    event: dict[str, Any]
    destinations: Sequence[Destination]
    # Why an event goes nowhere (a rule that drops it on purpose); counted, never silent.
    dropped_by: str | None = None


class Router(Protocol):
    def route(self, event: dict[str, Any]) -> Route: ...

    def route_rejected(self, envelope: dict[str, Any]) -> Route:
        """Where an event that failed validation goes too (wrapped with its reasons)."""
