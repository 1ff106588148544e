"""Read the names an event is about: the job's (namespace, name), or the dataset's.

Auth scopes tokens by job namespace, Kafka headers carry it, and routing rules match on
it; all of them read it through here so "which namespace is this event in" has one
answer. A DatasetEvent has no job; its dataset namespace stands in.
"""

from __future__ import annotations

from typing import Any

from proxy.openlineage.kinds import EventKind, event_kind

__all__ = ["subject_name"]


def subject_name(event: dict[str, Any]) -> tuple[str, str] | None:
    """``(namespace, name)`` of the job (run/job events) or dataset (dataset events)."""
    kind = event_kind(event)
    holder = event.get("dataset") if kind is EventKind.DATASET else event.get("job")
    if isinstance(holder, dict):
        namespace, name = holder.get("namespace"), holder.get("name")
        if isinstance(namespace, str) and isinstance(name, str):
            return namespace, name
    return None
