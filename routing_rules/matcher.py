"""Turn a rule's ``match`` into one predicate over an event, built once at load.

Every condition becomes a small closure with its patterns and field paths already
compiled; a ``match`` mapping is the conjunction of its conditions, cheapest first, and
``all`` / ``any`` / ``not`` nest. Matching never raises and never mutates the event:
a missing field or a value of the wrong JSON type simply does not match.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

from proxy.openlineage import EventKind, event_kind
from proxy.openlineage.paths import MISSING, FieldPath
from routing_rules.patterns import RegexPattern, compile_pattern, compiled_glob
from routing_rules.schema import DatasetCondition, DatasetQuantifier, FieldTest, Match

__all__ = [
    "KEY_FIELDS",
    "EventPredicate",
    "compile_match",
    "indexed_fields",
    "job_namespace",
    "key_guards",
    "routing_key",
    "same_json_value",
    "typed_key_value",
]

EventPredicate = Callable[[dict[str, Any]], bool]


def _always(event: dict[str, Any]) -> bool:
    return True


def job_namespace(event: dict[str, Any]) -> Any:
    """The job's namespace (any JSON type) or None when the event has no job mapping."""
    job = event.get("job")
    return job.get("namespace") if isinstance(job, dict) else None


def _job_name(event: dict[str, Any]) -> Any:
    job = event.get("job")
    return job.get("name") if isinstance(job, dict) else None


def same_json_value(actual: Any, expected: Any) -> bool:
    """Equality without Python's cross-type surprises (``True == 1``, ``1 == 1.0`` is ok)."""
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(expected, int | float):
        return isinstance(actual, int | float) and actual == expected
    if expected is None:
        return actual is None
    return isinstance(actual, str) and actual == expected


def _dataset_predicate(condition: DatasetCondition) -> Callable[[Any], bool]:
    namespace = compile_pattern(condition.namespace) if condition.namespace is not None else None
    name = compile_pattern(condition.name) if condition.name is not None else None

    def fits(dataset: Any) -> bool:
        if not isinstance(dataset, dict):
            return False
        if namespace is not None and not namespace(dataset.get("namespace")):
            return False
        return name is None or name(dataset.get("name"))

    return fits


def _datasets(side: str, quantifier: DatasetQuantifier) -> EventPredicate:
    if quantifier.any_ is not None:
        fits = _dataset_predicate(quantifier.any_)

        def any_fits(event: dict[str, Any]) -> bool:
            datasets = event.get(side)
            return isinstance(datasets, list) and any(fits(d) for d in datasets)

        return any_fits
    assert quantifier.all_ is not None
    fits = _dataset_predicate(quantifier.all_)

    def all_fit(event: dict[str, Any]) -> bool:
        # "all" needs at least one dataset: an event with no outputs does not write
        # only to s3, it writes nowhere.
        datasets = event.get(side)
        return isinstance(datasets, list) and bool(datasets) and all(fits(d) for d in datasets)

    return all_fit


def _facet_holders(event: dict[str, Any], level: str) -> list[Any]:
    """The facet mappings of one level (several for inputs / outputs)."""
    if level in ("run", "job", "dataset"):
        holder = event.get(level)
        return [holder.get("facets")] if isinstance(holder, dict) else []
    datasets = event.get(level)
    if not isinstance(datasets, list):
        return []
    extra = "inputFacets" if level == "inputs" else "outputFacets"
    return [d.get(key) for d in datasets if isinstance(d, dict) for key in ("facets", extra)]


def _has_facet(reference: str) -> EventPredicate:
    level, _, name = reference.partition(".")
    if level in ("run", "job", "dataset"):
        # One facets mapping: read it directly, no list per event (hot path).
        def present_on(event: dict[str, Any]) -> bool:
            holder = event.get(level)
            facets = holder.get("facets") if holder.__class__ is dict else None
            return facets.__class__ is dict and name in facets

        return present_on

    def present(event: dict[str, Any]) -> bool:
        return any(
            isinstance(facets, dict) and name in facets for facets in _facet_holders(event, level)
        )

    return present


def _equals(expected: Any) -> Callable[[Any], bool]:
    """:func:`same_json_value` against a fixed value, specialised by its type (hot path)."""
    if expected is None or isinstance(expected, bool):
        return lambda value: value is expected
    if isinstance(expected, str):
        return lambda value: value == expected and value.__class__ is str
    numbers = (int, float)
    return lambda value: value == expected and value.__class__ in numbers


def _value_test(expected: Any) -> Callable[[Any], bool]:
    if not isinstance(expected, FieldTest):
        return _equals(expected)
    if expected.regex is not None:
        return compile_pattern(RegexPattern(regex=expected.regex))
    if expected.glob is not None:
        match = compiled_glob(expected.glob).match
        return lambda value: isinstance(value, str) and match(value) is not None
    if expected.in_ is not None:
        options = tuple(expected.in_)
        return lambda value: any(same_json_value(value, o) for o in options)
    raise AssertionError("exists is handled by _field")


def _field(text: str, expected: Any) -> EventPredicate:
    path = FieldPath(text)
    if isinstance(expected, FieldTest) and expected.exists is not None:
        wanted = expected.exists
        return lambda event: (path.get(event) is not MISSING) is wanted
    test = _value_test(expected)
    if not path.has_wildcard:
        # MISSING passes no test: it equals nothing and is not a string.
        get = path.get
        return lambda event: test(get(event))
    return lambda event: any(test(v) for v in path.values(event))


def _on_value(read: Callable[[dict[str, Any]], Any], test: Callable[[Any], bool]) -> EventPredicate:
    return lambda event: test(read(event))


# The event values a routing key holds (see :func:`routing_key`), by condition name.
KEY_FIELDS = ("kind", "event_type", "job_namespace", "job_name", "producer")
_KEY_READERS: tuple[Callable[[dict[str, Any]], Any], ...] = (
    event_kind,
    lambda event: event.get("eventType"),
    job_namespace,
    _job_name,
    lambda event: event.get("producer"),
)


def routing_key(event: dict[str, Any]) -> tuple[Any, ...]:
    """The values that conditions in :data:`KEY_FIELDS` look at, in that order.

    Rules are indexed by them: whether a rule's key conditions hold is worked out once per
    distinct key, not once per event (see :class:`routing_rules.ruleset.Ruleset`).
    """
    job = event.get("job")
    if isinstance(job, dict):
        namespace, name = job.get("namespace"), job.get("name")
    else:
        namespace = name = None
    return (event_kind(event), event.get("eventType"), namespace, name, event.get("producer"))


def _key_value_predicate(match: Match, field: str) -> Callable[[Any], bool] | None:
    """The condition ``field`` of ``match`` as a test of one routing-key value."""
    if field == "kind":
        if match.kind is None:
            return None
        kinds = frozenset([match.kind] if isinstance(match.kind, EventKind) else match.kind)
        return lambda value: value in kinds
    if field == "event_type":
        if match.event_type is None:
            return None
        wanted = match.event_type
        types = frozenset([wanted] if isinstance(wanted, str) else wanted)
        return lambda value: isinstance(value, str) and value in types
    spec = getattr(match, field)
    return compile_pattern(spec) if spec is not None else None


def indexed_fields(match: Match) -> dict[str, Any]:
    """The ``fields`` conditions of a top-level match that can join the routing key:
    plain equality on a path without ``*`` (``run.facets.processing_engine.name: spark``)."""
    return {
        path: expected
        for path, expected in (match.fields or {}).items()
        if not isinstance(expected, FieldTest) and "*" not in path.split(".")
    }


def typed_key_value(value: Any) -> Any:
    """A field value as part of a routing key: equal exactly when :func:`same_json_value`
    says so (``True`` and ``1`` apart, ``1`` and ``1.0`` together)."""
    if value.__class__ is str:
        return value
    if value is None:
        return ("null",)
    if value.__class__ is bool:
        return ("bool", value)
    if value.__class__ in (int, float):
        return ("number", value)
    return value  # MISSING, or a list / mapping (not hashable: the index steps aside)


def key_guards(
    match: Match, field_positions: dict[str, int] | None = None
) -> tuple[tuple[int, Callable[[Any], bool]], ...]:
    """(position in the routing key, test) for each key condition of a top-level match;
    ``field_positions`` places the :func:`indexed_fields` paths after :data:`KEY_FIELDS`."""
    guards: list[tuple[int, Callable[[Any], bool]]] = []
    for index, field in enumerate(KEY_FIELDS):
        predicate = _key_value_predicate(match, field)
        if predicate is not None:
            guards.append((index, predicate))
    positions = field_positions or {}
    for path, expected in indexed_fields(match).items() if positions else ():
        wanted = typed_key_value(expected)
        guards.append((positions[path], functools.partial(operator.eq, wanted)))
    return tuple(guards)


def compile_match(match: Match, *, skip_key_fields: bool = False) -> EventPredicate:
    """One predicate for a ``match`` mapping (all of its conditions).

    ``skip_key_fields`` leaves out the conditions :func:`key_guards` covers (with field
    positions), for a caller that checks those through the routing-key index instead.
    """
    checks: list[EventPredicate] = []
    fields = dict(match.fields or {})
    if skip_key_fields:
        for path in indexed_fields(match):
            del fields[path]
    else:
        for field, read in zip(KEY_FIELDS, _KEY_READERS, strict=True):
            predicate = _key_value_predicate(match, field)
            if predicate is not None:
                checks.append(_on_value(read, predicate))
    if match.dataset is not None:
        fits = _dataset_predicate(match.dataset)
        checks.append(lambda event: fits(event.get("dataset")))
    if match.inputs is not None:
        checks.append(_datasets("inputs", match.inputs))
    if match.outputs is not None:
        checks.append(_datasets("outputs", match.outputs))
    checks.extend(_has_facet(reference) for reference in match.has_facets or ())
    checks.extend(_field(text, expected) for text, expected in fields.items())
    if match.all_ is not None:
        checks.extend(compile_match(m) for m in match.all_)
    if match.any_ is not None:
        alternatives = tuple(compile_match(m) for m in match.any_)
        checks.append(lambda event: any(p(event) for p in alternatives))
    if match.not_ is not None:
        negated = compile_match(match.not_)
        checks.append(lambda event: not negated(event))
    return _conjunction(checks)


def _conjunction(checks: list[EventPredicate]) -> EventPredicate:
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda event: first(event) and second(event)
    frozen = tuple(checks)
    return lambda event: all(p(event) for p in frozen)
