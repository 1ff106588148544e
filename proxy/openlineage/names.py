"""Read the names an event is about: the job's (namespace, name), or the dataset's.

Auth scopes tokens by job namespace, Kafka headers carry it, and routing rules match on
it; all of them read it through here so "which namespace is this event in" has one
answer. A DatasetEvent has no job; its dataset namespace stands in.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from proxy.openlineage.kinds import EventKind, event_kind

__all__ = ["NamedNamespace", "Role", "named_namespaces", "subject_name"]

# What a namespace is to an event: its job's, its parent's or root's job's (what the run
# attaches to), its DatasetEvent's dataset, or one of the datasets it read or wrote.
Role = Literal["job", "parent", "root", "dataset", "input", "output"]


def subject_name(event: dict[str, Any]) -> tuple[str, str] | None:
    """``(namespace, name)`` of the job (run/job events) or dataset (dataset events)."""
    kind = event_kind(event)
    holder = event.get("dataset") if kind is EventKind.DATASET else event.get("job")
    if isinstance(holder, dict):
        namespace, name = holder.get("namespace"), holder.get("name")
        if isinstance(namespace, str) and isinstance(name, str):
            return namespace, name
    return None


NamedNamespace = tuple[Role, str, str]  # (role, JSON pointer, namespace)


def named_namespaces(event: dict[str, Any]) -> Iterator[NamedNamespace]:
    """Every namespace ``event`` names that decides where it goes or what it attaches to,
    with its role and JSON pointer: what token scopes are checked against."""
    kind = event_kind(event)
    if kind is EventKind.DATASET:
        yield from _namespace_at(event.get("dataset"), "dataset", "/dataset")
        return
    yield from _namespace_at(event.get("job"), "job", "/job")
    run = event.get("run")
    facets = run.get("facets") if isinstance(run, dict) else None
    parent = facets.get("parent") if isinstance(facets, dict) else None
    if isinstance(parent, dict):
        yield from _namespace_at(parent.get("job"), "parent", "/run/facets/parent/job")
        root = parent.get("root")
        if isinstance(root, dict):
            yield from _namespace_at(root.get("job"), "root", "/run/facets/parent/root/job")
    sides: tuple[tuple[str, Role], ...] = (("inputs", "input"), ("outputs", "output"))
    for side, role in sides:
        datasets = event.get(side)
        for index, dataset in enumerate(datasets if isinstance(datasets, list) else ()):
            yield from _namespace_at(dataset, role, f"/{side}/{index}")


def _namespace_at(holder: Any, role: Role, pointer: str) -> Iterator[NamedNamespace]:
    if isinstance(holder, dict) and isinstance(namespace := holder.get("namespace"), str):
        yield role, f"{pointer}/namespace", namespace
