"""Turn a rule's ``match`` into one predicate over an event, built once at load.

Every condition becomes a small closure with its patterns and field paths already
compiled; a ``match`` mapping is the conjunction of its conditions, cheapest first, and
``all`` / ``any`` / ``not`` nest. Matching never raises and never mutates the event:
a missing field or a value of the wrong JSON type simply does not match.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proxy.openlineage import EventKind, event_kind
from proxy.openlineage.paths import MISSING, FieldPath
from routing_rules.patterns import RegexPattern, StringPredicate, compile_pattern, compiled_glob
from routing_rules.schema import DatasetCondition, DatasetQuantifier, FieldTest, Match

__all__ = ["EventPredicate", "compile_match", "job_namespace", "same_json_value"]

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

    def present(event: dict[str, Any]) -> bool:
        return any(
            isinstance(facets, dict) and name in facets for facets in _facet_holders(event, level)
        )

    return present


def _value_test(expected: Any) -> Callable[[Any], bool]:
    if not isinstance(expected, FieldTest):
        return lambda value: same_json_value(value, expected)
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
        return lambda event: (value := path.get(event)) is not MISSING and test(value)
    return lambda event: any(test(v) for v in path.values(event))


def _on_string(read: Callable[[dict[str, Any]], Any], pattern: StringPredicate) -> EventPredicate:
    return lambda event: pattern(read(event))


def compile_match(match: Match) -> EventPredicate:
    """One predicate for a ``match`` mapping (all of its conditions)."""
    checks: list[EventPredicate] = []
    if match.kind is not None:
        kinds = frozenset([match.kind] if isinstance(match.kind, EventKind) else match.kind)
        checks.append(lambda event: event_kind(event) in kinds)
    if match.event_type is not None:
        types = frozenset(
            [match.event_type] if isinstance(match.event_type, str) else match.event_type
        )
        checks.append(lambda event: event.get("eventType") in types)
    if match.job_namespace is not None:
        checks.append(_on_string(job_namespace, compile_pattern(match.job_namespace)))
    if match.job_name is not None:
        checks.append(_on_string(_job_name, compile_pattern(match.job_name)))
    if match.producer is not None:
        checks.append(_on_string(lambda e: e.get("producer"), compile_pattern(match.producer)))
    if match.dataset is not None:
        fits = _dataset_predicate(match.dataset)
        checks.append(lambda event: fits(event.get("dataset")))
    if match.inputs is not None:
        checks.append(_datasets("inputs", match.inputs))
    if match.outputs is not None:
        checks.append(_datasets("outputs", match.outputs))
    checks.extend(_has_facet(reference) for reference in match.has_facets or ())
    checks.extend(_field(text, expected) for text, expected in (match.fields or {}).items())
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
