"""The Kafka message key of an event, following the official clients' convention.

Keying a run event by its *root* job keeps every event of one pipeline run (the
application run and each of its child runs) in one partition, so consumers see them in
order. Job and dataset events are keyed by what they describe.
"""

from __future__ import annotations

from typing import Any

from proxy.openlineage.kinds import EventKind, event_kind

__all__ = ["event_key", "qualified_name"]


def qualified_name(holder: Any) -> str | None:
    """``{namespace}/{name}`` of a job or dataset object; None when either is missing."""
    if isinstance(holder, dict):
        namespace, name = holder.get("namespace"), holder.get("name")
        if isinstance(namespace, str) and isinstance(name, str):
            return f"{namespace}/{name}"
    return None


def _run_key_job(event: dict[str, Any]) -> str | None:
    """The job that names a run event's key: root parent job, else parent job, else own."""
    facets = event.get("run", {}).get("facets") or {}
    parent = facets.get("parent") if isinstance(facets, dict) else None
    if isinstance(parent, dict):
        root = parent.get("root")
        if isinstance(root, dict) and (ref := qualified_name(root.get("job"))):
            return ref
        if ref := qualified_name(parent.get("job")):
            return ref
    return qualified_name(event.get("job"))


def event_key(event: dict[str, Any]) -> str | None:
    """``run:{ns}/{name}``, ``job:{ns}/{name}`` or ``dataset:{ns}/{name}``; None if unnamed."""
    kind = event_kind(event)
    if kind is EventKind.RUN:
        ref = _run_key_job(event)
        return f"run:{ref}" if ref else None
    if kind is EventKind.JOB:
        ref = qualified_name(event.get("job"))
        return f"job:{ref}" if ref else None
    if kind is EventKind.DATASET:
        ref = qualified_name(event.get("dataset"))
        return f"dataset:{ref}" if ref else None
    return None
