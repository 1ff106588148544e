"""Compiled rules and how an event is evaluated against them.

Semantics (what a rules file means):

- Rules are tried in order. The first rule whose ``match`` holds acts and evaluation
  stops, unless the rule says ``continue: true``; then later rules are tried too and
  the destinations of every matched rule are collected (in order, without repeats).
- Transforms of matched rules apply in order to a private copy of the event; later
  rules match against the transformed event (so a rule can align namespaces first and
  the next route by the aligned name), and every destination gets the final event.
- ``drop: true`` ends evaluation: the event goes nowhere, even to destinations collected
  before. A ``throttle`` that suppresses a RUNNING event ends evaluation too, but keeps
  it only from its own rule's destinations and every later rule's: the destinations that
  earlier ``continue: true`` rules collected still get it. That is how a streaming job's
  every RUNNING event reaches Kafka while the archive keeps one per run per interval
  (a throttle limits one route's volume; a drop says the event must go nowhere). With
  nothing collected before, a suppressed event goes nowhere, not to the default.
- When evaluation ends with no destinations and no drop, the ``default`` route applies.
  Every outcome is counted per rule (:mod:`routing_rules.stats`): nothing disappears
  without a name.

Speed: the top-level conditions on kind, eventType, job namespace, job name and producer,
and top-level ``fields`` equalities, are not run per event. Those values form the event's
routing key; for each distinct key the rules whose key conditions hold are worked out
once and remembered, so an event only runs the remaining conditions of rules that can
apply to it. (A field with a different value in every event makes every key new: then
the memo gains nothing and costs little.) With 100 per-team
rules routing costs about the same as with one (bench/routing_rules.py).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import orjson

from proxy.openlineage.paths import FieldPath
from proxy.support.bounded_cache import BoundedCache
from routing_rules.matcher import EventPredicate, routing_key, typed_key_value
from routing_rules.stats import DEFAULT_RULE, RuleStats
from routing_rules.throttle import RunningThrottle
from routing_rules.transforms import TransformStep

__all__ = ["CompiledRule", "Route", "Ruleset", "Trace"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Route(Generic[T]):
    """Where one event goes, and the event as it should be sent (rules may transform it).
    ``T`` is :class:`~proxy.destinations.Destination` in the proxy; a dry run routes to
    destination names."""

    event: dict[str, Any]
    destinations: Sequence[T]
    # Why an event goes nowhere (a rule that drops it on purpose); counted, never silent.
    dropped_by: str | None = None


# Distinct routing keys whose candidate rules are remembered; beyond it the oldest are
# forgotten (cheap to refill) so a flood of distinct jobs cannot grow memory.
_MEMO_LIMIT = 4096


@dataclass(slots=True, eq=False)
class CompiledRule(Generic[T]):
    name: str
    index: int
    # The match without its routing-key conditions, which are ``guards``:
    # (position in the routing key, test of that value).
    matches: EventPredicate
    guards: tuple[tuple[int, Callable[[Any], bool]], ...]
    throttle: RunningThrottle | None
    transforms: tuple[TransformStep, ...]
    destinations: tuple[T, ...]
    continue_: bool
    drop: bool
    stats: RuleStats

    def applies_to(self, key: tuple[Any, ...]) -> bool:
        return all(test(key[index]) for index, test in self.guards)


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
        copied: dict[str, Any] = orjson.loads(orjson.dumps(event))
    except TypeError:
        return copy.deepcopy(event)
    return copied


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
        field_paths: tuple[FieldPath, ...] = (),
    ) -> None:
        self.rules = tuple(rules)
        self.default = default
        self.default_stats = default_stats
        self.rejected = rejected
        self.source = source
        self._field_paths = field_paths
        self._by_key: BoundedCache[tuple[Any, ...], tuple[CompiledRule[T], ...]] = BoundedCache(
            _MEMO_LIMIT
        )

    @property
    def destinations(self) -> tuple[T, ...]:
        """Every destination some route can reach, in first-use order."""
        seen: tuple[T, ...] = ()
        for targets in [r.destinations for r in self.rules] + [self.default, self.rejected]:
            seen = _merged(seen, targets)
        return seen

    def _key(self, event: dict[str, Any]) -> tuple[Any, ...]:
        key = routing_key(event)
        if self._field_paths:
            key += tuple(typed_key_value(path.get(event)) for path in self._field_paths)
        return key

    def _candidates(self, key: tuple[Any, ...]) -> tuple[CompiledRule[T], ...]:
        try:
            found = self._by_key.get(key)
        except TypeError:  # a value that is not hashable (not valid OpenLineage): no memo
            return tuple(r for r in self.rules if r.applies_to(key))
        if found is None:
            found = tuple(r for r in self.rules if r.applies_to(key))
            self._by_key.put(key, found)
        return found

    def route(self, event: dict[str, Any], trace: Trace | None = None) -> Route[T]:
        current = event
        key = self._key(event)
        candidates = self._candidates(key)
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
                if collected:
                    return Route(current, collected)
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
                new_key = self._key(current)
                if new_key != key:
                    # E.g. a mapped job namespace: the remaining rules are the later
                    # candidates of the new key.
                    key = new_key
                    candidates = tuple(r for r in self._candidates(key) if r.index > rule.index)
                    position = 0
            if rule.destinations:
                collected = (
                    _merged(collected, rule.destinations) if collected else rule.destinations
                )
            if not rule.continue_:
                break
        if collected:
            return Route(current, collected)
        self.default_stats.matched += 1
        if trace is not None:
            trace.defaulted = True
        if not self.default:
            self.default_stats.dropped += 1
            return Route(current, (), dropped_by=DEFAULT_RULE)
        return Route(current, self.default)
