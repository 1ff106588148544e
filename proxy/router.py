"""The seam between "this event is valid" and "these destinations get it".

The proxy asks a :class:`Router` where an event goes; the rule engine in
``routing_rules/`` (:class:`routing_rules.router.RulesRouter`) is the implementation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from proxy.destinations import Destination

__all__ = ["Route", "Router"]


D = TypeVar("D")


@dataclass(frozen=True, slots=True)
class Route(Generic[D]):
    """Where one event goes, and the event as it should be sent (rules may transform it).
    ``D`` is :class:`Destination` in the proxy; a dry run routes to destination names."""

    event: dict[str, Any]
    destinations: Sequence[D]
    # Why an event goes nowhere (a rule that drops it on purpose); counted, never silent.
    dropped_by: str | None = None


class Router(Protocol):
    def route(self, event: dict[str, Any]) -> Route[Destination]: ...

    def route_rejected(self, envelope: dict[str, Any]) -> Route[Destination]:
        """Where an event that failed validation goes too (wrapped with its reasons)."""
