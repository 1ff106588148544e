"""The rules as the proxy's :class:`proxy.router.Router`: route by the current ruleset.

:mod:`routing_rules.reload` swaps :attr:`RulesRouter.ruleset` in one assignment when a
new rules file has been loaded, built and compiled, so an event is always routed by
one whole ruleset, old or new, never a mix.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from proxy.destinations import Destination
from proxy.openlineage.repaired import RepairedEvent
from proxy.router import Route
from routing_rules.ruleset import Ruleset

__all__ = ["RulesRouter"]


class RulesRouter:
    def __init__(self, ruleset: Ruleset[Destination]) -> None:
        self.ruleset = ruleset

    def route(self, event: dict[str, Any]) -> Route[Destination]:
        route = self.ruleset.route(event)
        if isinstance(event, RepairedEvent) and route.event is not event:
            # Transforms work on a plain copy; what was repaired still travels with it.
            return replace(route, event=RepairedEvent(route.event, event.repairs))
        return route

    def route_rejected(self, envelope: dict[str, Any]) -> Route[Destination]:
        return Route(envelope, self.ruleset.rejected)
