"""The seam between "this event is valid" and "these destinations get it".

The proxy asks a :class:`Router` where an event goes. :class:`SingleTopicRouter` is the
built-in answer (every event to one Kafka topic); the rule engine in ``routing_rules/``
is another implementation of the same protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from proxy.destinations import Destination

__all__ = ["Route", "Router", "SingleTopicRouter"]


@dataclass(frozen=True, slots=True)
class Route:
    """Where one event goes, and the event as it should be sent (rules may transform it)."""

    event: dict[str, Any]
    destinations: Sequence[Destination]
    # Why an event goes nowhere (a rule that drops it on purpose); counted, never silent.
    dropped_by: str | None = None


class Router(Protocol):
    def route(self, event: dict[str, Any]) -> Route: ...


class SingleTopicRouter:
    """Every valid event to the same destinations, unchanged."""

    def __init__(self, destinations: Sequence[Destination]) -> None:
        self._destinations = tuple(destinations)

    def route(self, event: dict[str, Any]) -> Route:
        return Route(event, self._destinations)
