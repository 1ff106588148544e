"""The seam between "this event is valid" and "these destinations get it".

The pipeline asks a :class:`Router` where an event goes;
:class:`proxy.ingest.live_rules.RulesRouter`
(the current rules file) is the implementation.
"""

from __future__ import annotations

from typing import Any, Protocol

from proxy.destinations import Destination
from routing_rules.ruleset import Route, Trace

__all__ = ["Route", "Router", "Trace"]


class Router(Protocol):
    def route(self, event: dict[str, Any], trace: Trace | None = None) -> Route[Destination]:
        """Where ``event`` goes; ``trace``, when given, learns which rules matched."""

    def route_rejected(self, envelope: dict[str, Any]) -> Route[Destination]:
        """Where an event that failed validation goes too (wrapped with its reasons)."""
