"""Build a ruleset from YAML text, routing to destination names (no live destinations)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

from routing_rules.compiler import compile_rules
from routing_rules.loader import load_rules_file
from routing_rules.ruleset import Ruleset
from routing_rules.stats import RoutingStats

DESTINATIONS = """
destinations:
  a: {kind: kafka, topic: a}
  b: {kind: kafka, topic: b}
  c: {kind: archive, directory: c}
"""


def ruleset(
    body: str,
    stats: RoutingStats | None = None,
    clock: Callable[[], float] | None = None,
) -> Ruleset[str]:
    """``body`` is the rules and default part; destinations a, b, c are declared."""
    text = "version: 1\n" + DESTINATIONS + textwrap.dedent(body)
    rules = load_rules_file("rules.yaml", text)
    kwargs: dict[str, Any] = {"clock": clock} if clock is not None else {}
    return compile_rules(rules, lambda name: name, stats or RoutingStats(), **kwargs)
