"""The Kafka message key of an event: every event of one run under one key.

A run event is keyed by its own ``run.runId`` (``run:{runId}``), the one field that every
event of a run carries whatever else it sends: keying by the parent or root job (the
official clients' convention) split a run whenever its later events left the parent facet
out (openlineage-python's COMPLETE without facets, any client that sends facets only on
START), and the split halves went to two partitions and were delivered out of order. A
run's events therefore stay in one partition, in the order they were acknowledged,
across proxy restarts and replicas (the key needs no state). The order *between* runs —
a parent and its children, a writer and its reader — is kept for the targets that need
it by ordered delivery (consumers/ordered.py), not by the key.

Job and dataset events are keyed by what they describe.
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


def _run_id(event: dict[str, Any]) -> str | None:
    run = event.get("run")
    run_id = run.get("runId") if isinstance(run, dict) else None
    return run_id if isinstance(run_id, str) and run_id else None


def event_key(event: dict[str, Any]) -> str | None:
    """``run:{runId}``, ``job:{ns}/{name}`` or ``dataset:{ns}/{name}``; None if unnamed."""
    kind = event_kind(event)
    if kind is EventKind.RUN:
        run_id = _run_id(event)
        return f"run:{run_id}" if run_id else None
    if kind is EventKind.JOB:
        ref = qualified_name(event.get("job"))
        return f"job:{ref}" if ref else None
    if kind is EventKind.DATASET:
        ref = qualified_name(event.get("dataset"))
        return f"dataset:{ref}" if ref else None
    return None
