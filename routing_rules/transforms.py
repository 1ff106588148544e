"""Rule transforms, compiled once: drop facets, redact fields, map namespaces, add tags.

Each step rewrites the event in place and returns how many values it changed (the
dry run prints that); the ruleset hands it a private copy of the event first, so the
caller's event is never touched. A step that finds nothing to change changes nothing:
it never creates the fields it would rewrite (except ``add_tags``, whose job that is).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from proxy.openlineage import EventKind, event_kind
from proxy.openlineage.paths import FieldPath
from routing_rules.patterns import compiled_glob, is_literal
from routing_rules.schema import NamespaceMapping, Transform

__all__ = ["PRODUCER", "REDACTED", "TransformStep", "compile_transform"]

REDACTED = "***REDACTED***"
# The _producer of facets the proxy itself adds.
PRODUCER = "https://github.com/lineage-proxy/lineage-proxy"
_FACETS = "https://openlineage.io/spec/facets/1-0-0"


class TransformStep:
    """One compiled transform step."""

    __slots__ = ("apply", "description")

    def __init__(self, description: str, apply: Callable[[dict[str, Any]], int]) -> None:
        self.description = description
        self.apply = apply


def _facet_mappings(event: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every facets mapping of an event: run, job, dataset, and each input/output's."""
    for level in ("run", "job", "dataset"):
        holder = event.get(level)
        if isinstance(holder, dict) and isinstance(facets := holder.get("facets"), dict):
            yield facets
    for side, extra in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
        datasets = event.get(side)
        for dataset in datasets if isinstance(datasets, list) else ():
            if isinstance(dataset, dict):
                for key in ("facets", extra):
                    if isinstance(facets := dataset.get(key), dict):
                        yield facets


def _drop_facets(names: list[str]) -> TransformStep:
    exact = frozenset(n for n in names if is_literal(n))
    globs = tuple(compiled_glob(n).match for n in names if not is_literal(n))

    def doomed(name: str) -> bool:
        return name in exact or any(g(name) for g in globs)

    def apply(event: dict[str, Any]) -> int:
        dropped = 0
        for facets in _facet_mappings(event):
            for name in [n for n in facets if doomed(n)]:
                del facets[name]
                dropped += 1
        return dropped

    return TransformStep(f"drop_facets {', '.join(names)}", apply)


def _redact(paths: list[str]) -> TransformStep:
    compiled = tuple(FieldPath(p) for p in paths)

    def apply(event: dict[str, Any]) -> int:
        return sum(path.replace(event, REDACTED) for path in compiled)

    return TransformStep(f"redact {', '.join(paths)}", apply)


def _namespace_mapper(mappings: list[NamespaceMapping]) -> Callable[[Any], str | None]:
    """namespace → its new name, or None when no mapping applies."""
    exact = {m.from_: m.to for m in mappings if m.from_ is not None}
    patterns = tuple((re.compile(m.from_regex), m.to) for m in mappings if m.from_regex is not None)

    def mapped(namespace: Any) -> str | None:
        if not isinstance(namespace, str):
            return None
        if namespace in exact:
            return exact[namespace]
        for pattern, template in patterns:
            if (found := pattern.fullmatch(namespace)) is not None:
                return found.expand(template)
        return None

    return mapped


def _remap(holder: Any, mapped: Callable[[Any], str | None]) -> int:
    if not isinstance(holder, dict):
        return 0
    new = mapped(holder.get("namespace"))
    if new is None or new == holder["namespace"]:
        return 0
    holder["namespace"] = new
    return 1


def _job_holders(event: dict[str, Any]) -> Iterator[Any]:
    """The event's job and the parent / root parent jobs its run facets point at."""
    yield event.get("job")
    run = event.get("run")
    facets = run.get("facets") if isinstance(run, dict) else None
    parent = facets.get("parent") if isinstance(facets, dict) else None
    if isinstance(parent, dict):
        yield parent.get("job")
        root = parent.get("root")
        if isinstance(root, dict):
            yield root.get("job")


# Column lineage names its input datasets too, and a symlinks facet other names of the
# dataset (Flink names a Kafka topic's SQL table in the topic's namespace); left unmapped
# they would split the graph.
_NAMED_IN_FACETS = (
    FieldPath("outputs.*.facets.columnLineage.fields.*.inputFields.*"),
    FieldPath("outputs.*.facets.columnLineage.dataset.*"),
    FieldPath("inputs.*.facets.symlinks.identifiers.*"),
    FieldPath("outputs.*.facets.symlinks.identifiers.*"),
    FieldPath("dataset.facets.symlinks.identifiers.*"),
)


def _dataset_holders(event: dict[str, Any]) -> Iterator[Any]:
    yield event.get("dataset")
    for side in ("inputs", "outputs"):
        datasets = event.get(side)
        yield from datasets if isinstance(datasets, list) else ()
    for path in _NAMED_IN_FACETS:
        yield from path.values(event)


def _map_namespaces(
    datasets: list[NamespaceMapping], jobs: list[NamespaceMapping]
) -> TransformStep:
    map_dataset = _namespace_mapper(datasets)
    map_job = _namespace_mapper(jobs)

    def apply(event: dict[str, Any]) -> int:
        changed = 0
        if jobs:
            changed += sum(_remap(h, map_job) for h in _job_holders(event))
        if datasets:
            changed += sum(_remap(h, map_dataset) for h in _dataset_holders(event))
        return changed

    parts = [f"{len(datasets)} dataset"] * bool(datasets) + [f"{len(jobs)} job"] * bool(jobs)
    return TransformStep(
        f"map_namespaces ({' and '.join(parts) or 'no'} mappings)",
        apply,
    )


def _add_tags(tags: dict[str, str]) -> TransformStep:
    def apply(event: dict[str, Any]) -> int:
        is_dataset = event_kind(event) is EventKind.DATASET
        holder = event.get("dataset" if is_dataset else "job")
        if not isinstance(holder, dict):
            return 0
        facets = holder.get("facets")
        if not isinstance(facets, dict):
            facets = holder["facets"] = {}
        facet_type = "TagsDatasetFacet" if is_dataset else "TagsJobFacet"
        facet = facets.get("tags")
        if not isinstance(facet, dict) or not isinstance(facet.get("tags"), list):
            facet = facets["tags"] = {
                "_producer": PRODUCER,
                "_schemaURL": f"{_FACETS}/{facet_type}.json#/$defs/{facet_type}",
                "tags": [],
            }
        existing: list[Any] = facet["tags"]
        for key, value in tags.items():
            tag = {"key": key, "value": value, "source": "lineage-proxy"}
            for index, old in enumerate(existing):
                if isinstance(old, dict) and old.get("key") == key:
                    existing[index] = tag
                    break
            else:
                existing.append(tag)
        return len(tags)

    return TransformStep("add_tags " + ", ".join(f"{k}={v}" for k, v in tags.items()), apply)


def compile_transform(step: Transform) -> TransformStep:
    if step.drop_facets is not None:
        return _drop_facets(step.drop_facets)
    if step.redact is not None:
        return _redact(step.redact)
    if step.map_namespaces is not None:
        return _map_namespaces(step.map_namespaces.datasets, step.map_namespaces.jobs)
    assert step.add_tags is not None
    return _add_tags(step.add_tags)
