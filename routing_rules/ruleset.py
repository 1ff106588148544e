"""Compiled rules and how an event is evaluated against them.

Semantics (what a rules file means):

- Rules are tried in order. The first rule whose ``match`` holds acts and evaluation
  stops, unless the rule says ``continue: true``; then later rules are tried too and
  the destinations of every matched rule are collected (in order, without repeats).
- Transforms of matched rules apply in order to a private copy of the event; later
  rules match against the transformed event (so a rule can align namespaces first and
  the next route by the aligned name), and every destination gets the final event.
- ``drop: true`` ends evaluation: the event goes nowhere, even to destinations collected
  before. A ``throttle`` that suppresses a RUNNING event does the same.
- When evaluation ends with no destinations and no drop, the ``default`` route applies.
  Every outcome is counted per rule (:mod:`routing_rules.stats`): nothing disappears
  without a name.

Speed: rules whose ``match`` names a ``job_namespace`` are indexed; for each distinct
job namespace the candidate rules are worked out once and remembered, so an event only
runs the predicates of rules that can apply to its namespace. With many per-team rules
routing costs about the same as with one.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import orjson

from proxy.router import Route
from routing_rules.matcher import EventPredicate, job_namespace
from routing_rules.patterns import StringPredicate
from routing_rules.stats import DEFAULT_RULE, RuleStats
from routing_rules.throttle import RunningThrottle
from routing_rules.transforms import TransformStep

__all__ = ["CompiledRule", "Ruleset", "Trace"]

T = TypeVar("T")

# Distinct job namespaces whose candidate rules are remembered; beyond it the memo is
# cleared (cheap to refill) so a flood of random namespaces cannot grow memory.
_MEMO_LIMIT = 4096


@dataclass(slots=True, eq=False)
class CompiledRule(Generic[T]):
    name: str
    index: int
    # The match without its job_namespace condition, which is ``namespace_guard``.
    matches: EventPredicate
    namespace_guard: StringPredicate | None
    throttle: RunningThrottle | None
    transforms: tuple[TransformStep, ...]
    destinations: tuple[T, ...]
    continue_: bool
    drop: bool
    stats: RuleStats
    moves_job_namespace: bool = False


@dataclass(slots=True)
class Trace:
    """What happened to one event, for ``rules test`` (the dry run)."""

    matched: list[str] = field(default_factory=list)
    # (rule, transform description, values changed)
    transforms: list[tuple[str, str, int]] = field(default_factory=list)
    # The default route decided (no rule sent the event anywhere).
    defaulted: bool = False


def _json_copy(event: dict[str, Any]) -> dict[str, Any]:
    try:
        return orjson.loads(orjson.dumps(event))  # type: ignore[no-any-return]
    except TypeError:
        return copy.deepcopy(event)


def _merged(first: tuple[T, ...], more: tuple[T, ...]) -> tuple[T, ...]:
    return first + tuple(d for d in more if d not in first)


class Ruleset(Generic[T]):
    """Compiled rules; ``route(event)`` says where an event goes (see module docstring)."""

    def __init__(
        self,
        rules: Sequence[CompiledRule[T]],
        *,
        default: tuple[T, ...],
        default_stats: RuleStats,
        rejected: tuple[T, ...] = (),
        source: str = "",
    ) -> None:
        self.rules = tuple(rules)
        self.default = default
        self.default_stats = default_stats
        self.rejected = rejected
        self.source = source
        self._unguarded = tuple(r for r in self.rules if r.namespace_guard is None)
        self._by_namespace: dict[str, tuple[CompiledRule[T], ...]] = {}

    @property
    def destinations(self) -> tuple[T, ...]:
        """Every destination some route can reach, in first-use order."""
        seen: tuple[T, ...] = ()
        for targets in [r.destinations for r in self.rules] + [self.default, self.rejected]:
            seen = _merged(seen, targets)
        return seen

    def _candidates(self, namespace: Any) -> tuple[CompiledRule[T], ...]:
        if not isinstance(namespace, str):
            return self._unguarded
        found = self._by_namespace.get(namespace)
        if found is None:
            found = tuple(
                r for r in self.rules if r.namespace_guard is None or r.namespace_guard(namespace)
            )
            if len(self._by_namespace) >= _MEMO_LIMIT:
                self._by_namespace.clear()
            self._by_namespace[namespace] = found
        return found

    def route(self, event: dict[str, Any], trace: Trace | None = None) -> Route:
        current = event
        namespace = job_namespace(event)
        candidates = self._candidates(namespace)
        collected: tuple[T, ...] = ()
        copied = False
        position = 0
        while position < len(candidates):
            rule = candidates[position]
            position += 1
            if not rule.matches(current):
                continue
            stats = rule.stats
            stats.matched += 1
            if trace is not None:
                trace.matched.append(rule.name)
            if rule.throttle is not None and rule.throttle.suppresses(current):
                stats.throttled += 1
                return Route(current, (), dropped_by=f"{rule.name} (throttle)")
            if rule.drop:
                stats.dropped += 1
                return Route(current, (), dropped_by=rule.name)
            if rule.transforms:
                if not copied:
                    current, copied = _json_copy(current), True
                for step in rule.transforms:
                    changed = step.apply(current)
                    if trace is not None:
                        trace.transforms.append((rule.name, step.description, changed))
                if rule.moves_job_namespace and job_namespace(current) != namespace:
                    # The event now belongs to another namespace: the remaining rules
                    # are the later candidates of that namespace.
                    namespace = job_namespace(current)
                    candidates = tuple(
                        r for r in self._candidates(namespace) if r.index > rule.index
                    )
                    position = 0
            if rule.destinations:
                collected = (
                    _merged(collected, rule.destinations) if collected else rule.destinations
                )
            if not rule.continue_:
                break
        if collected:
            return Route(current, collected)  # type: ignore[arg-type]
        self.default_stats.matched += 1
        if trace is not None:
            trace.defaulted = True
        if not self.default:
            self.default_stats.dropped += 1
            return Route(current, (), dropped_by=DEFAULT_RULE)
        return Route(current, self.default)  # type: ignore[arg-type]
