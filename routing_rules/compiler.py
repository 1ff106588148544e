"""Compile a checked rules file into a :class:`~routing_rules.ruleset.Ruleset`, once.

Patterns become compiled regexes or set lookups, field paths are split, transforms
become closures, and destination names are resolved to whatever the caller routes to:
live destinations in the proxy, plain names in the dry run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from proxy.openlineage.paths import FieldPath
from routing_rules.matcher import KEY_FIELDS, compile_match, indexed_fields, key_guards
from routing_rules.ruleset import CompiledRule, Ruleset
from routing_rules.schema import RulesFile, rule_names
from routing_rules.stats import DEFAULT_RULE, RoutingStats
from routing_rules.throttle import RunningThrottle
from routing_rules.transforms import compile_transform

__all__ = ["compile_rules"]

T = TypeVar("T")


def compile_rules(
    rules_file: RulesFile,
    resolve: Callable[[str], T],
    stats: RoutingStats,
    *,
    source: str = "",
    clock: Callable[[], float] = time.monotonic,
) -> Ruleset[T]:
    """``resolve`` maps a destination name (already checked to exist) to what routes get."""
    compiled: list[CompiledRule[T]] = []
    # Field paths compared for equality at the top level of some rule join the routing key.
    field_paths = list(
        dict.fromkeys(path for rule in rules_file.rules for path in indexed_fields(rule.match))
    )
    positions = {path: len(KEY_FIELDS) + j for j, path in enumerate(field_paths)}
    names = rule_names(rules_file.rules)
    for index, (name, rule) in enumerate(zip(names, rules_file.rules, strict=True)):
        transforms = tuple(compile_transform(step) for step in rule.transform)
        compiled.append(
            CompiledRule(
                name=name,
                index=index,
                # Key conditions are checked through the ruleset's index, once per key.
                matches=compile_match(rule.match, skip_key_fields=True),
                guards=key_guards(rule.match, positions),
                throttle=(
                    RunningThrottle(rule.throttle.interval_seconds, rule.throttle.max_runs, clock)
                    if rule.throttle is not None
                    else None
                ),
                transforms=transforms,
                destinations=tuple(resolve(d) for d in dict.fromkeys(rule.to)),
                continue_=rule.continue_,
                drop=rule.drop,
                stats=stats.for_rule(name),
            )
        )
    rejected = rules_file.rejected.to if rules_file.rejected is not None else []
    return Ruleset(
        compiled,
        default=tuple(resolve(d) for d in dict.fromkeys(rules_file.default.to)),
        default_stats=stats.for_rule(DEFAULT_RULE),
        rejected=tuple(resolve(d) for d in dict.fromkeys(rejected)),
        source=source,
        field_paths=tuple(FieldPath(path) for path in field_paths),
    )
