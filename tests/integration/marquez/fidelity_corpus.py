"""A corpus of events whose Marquez graph depends on arrival order, written to catch every
way a proxy in the middle could change it (issue 36):

- two root jobs (DAG runs) with child task runs, interleaved: the children name their
  parent and root on START only, and their COMPLETE or OTHER carries no facets at all (as
  openlineage-python sends them), so keying a run by its parent's job split it;
- a reader in one DAG of a dataset another DAG writes, and a second write of that dataset
  with another schema afterwards: which version each run read, and the dataset's fields,
  follow the order of arrival;
- column lineage, a FAIL, names with spaces, unicode and slashes;
- what Marquez 0.50 cannot take: openlineage-python's JobEvent (its datasets carry
  ``outputFacets``: 500, a NullPointerException on the missing run) and a NUL in a facet
  string (500, PostgreSQL refuses it); and a JobEvent it takes (no such facets).

Event times are a second apart, in the order the events are sent, as a live pipeline
sends them.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.sample_events import PRODUCER, SCHEMA_URL, facet

__all__ = ["corpus", "refused_by_marquez"]

_JOB_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent"
_PG = "postgres://warehouse:5432"
_S3 = "s3://lake-bucket"  # Marquez refuses a namespace with a space (400)


def _schema(*fields: str) -> dict[str, Any]:
    return facet(
        "SchemaDatasetFacet",
        "1-1-1",
        fields=[{"name": name, "type": "string"} for name in fields],
    )


def _dataset(namespace: str, name: str, *fields: str) -> dict[str, Any]:
    dataset: dict[str, Any] = {"namespace": namespace, "name": name}
    if fields:
        dataset["facets"] = {"schema": _schema(*fields)}
    return dataset


class _Clock:
    def __init__(self) -> None:
        self._now = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)

    def tick(self) -> str:
        self._now += timedelta(seconds=1)
        return self._now.isoformat().replace("+00:00", "Z")


def _run_event(
    clock: _Clock,
    namespace: str,
    job: str,
    run_id: str,
    event_type: str,
    *,
    parent: tuple[str, str, str] | None = None,
    inputs: list[dict[str, Any]] | None = None,
    outputs: list[dict[str, Any]] | None = None,
    bare: bool = False,
) -> dict[str, Any]:
    """A RunEvent; ``bare``: no facets, inputs or outputs at all (openlineage-python's
    COMPLETE as most integrations send it)."""
    event: dict[str, Any] = {
        "eventType": event_type,
        "eventTime": clock.tick(),
        "producer": PRODUCER,
        "schemaURL": SCHEMA_URL,
        "run": {"runId": run_id},
        "job": {"namespace": namespace, "name": job},
    }
    if bare:
        return event
    run_facets: dict[str, Any] = {}
    if parent is not None:
        ref = {"job": {"namespace": parent[0], "name": parent[1]}, "run": {"runId": parent[2]}}
        run_facets["parent"] = facet("ParentRunFacet", "1-1-0", **ref, root=ref)
    event["run"]["facets"] = run_facets
    event["job"]["facets"] = {}
    event["inputs"] = inputs or []
    event["outputs"] = outputs or []
    return event


def corpus(namespace: str) -> list[dict[str, Any]]:
    """The events, in the order a client sends them (each after the last was answered)."""
    clock = _Clock()
    dag_a, dag_b = ("orders daily", "reports/weekly ü")
    ra, rb = str(uuid.uuid4()), str(uuid.uuid4())
    extract, load, report, second_load = (str(uuid.uuid4()) for _ in range(4))
    raw = _dataset(_S3, "raw/orders.csv", "id", "amount")
    orders = _dataset(_PG, "shop.public.orders", "id", "amount", "day")
    orders_v2 = _dataset(_PG, "shop.public.orders", "id", "amount", "day", "country")
    summary = _dataset(_PG, "shop.public.summary", "day", "total")
    summary["facets"]["columnLineage"] = facet(
        "ColumnLineageDatasetFacet",
        "1-2-0",
        fields={
            "total": {
                "inputFields": [{"namespace": _PG, "name": "shop.public.orders", "field": "amount"}]
            }
        },
    )
    a, b = (namespace, dag_a, ra), (namespace, dag_b, rb)
    fail_run = str(uuid.uuid4())
    events = [
        _run_event(clock, namespace, dag_a, ra, "START"),
        _run_event(clock, namespace, dag_b, rb, "START"),
        _run_event(clock, namespace, f"{dag_a}.extract", extract, "START", parent=a, inputs=[raw]),
        _run_event(clock, namespace, f"{dag_a}.extract", extract, "OTHER", bare=True),
        _run_event(clock, namespace, f"{dag_a}.extract", extract, "COMPLETE", bare=True),
        _run_event(
            clock,
            namespace,
            f"{dag_a}.load",
            load,
            "START",
            parent=a,
            inputs=[raw],
            outputs=[orders],
        ),
        _run_event(
            clock,
            namespace,
            f"{dag_a}.load",
            load,
            "COMPLETE",
            inputs=[raw],
            outputs=[orders],
        ),
        # dag_b reads what dag_a's load just wrote: the version it links is the COMPLETE's.
        _run_event(
            clock,
            namespace,
            f"{dag_b}.report",
            report,
            "START",
            parent=b,
            inputs=[_dataset(_PG, "shop.public.orders")],
            outputs=[summary],
        ),
        _job_event(clock, namespace, f"{dag_a}.load", outputFacets={}),  # refused
        _job_event(clock, namespace, f"{dag_b}.report"),  # taken
        _run_event(clock, namespace, f"{dag_b}.report", report, "COMPLETE", bare=True),
        _run_event(clock, namespace, dag_a, ra, "COMPLETE", bare=True),
        # A second load changes the table's schema: the dataset's fields are the last seen.
        _run_event(
            clock,
            namespace,
            f"{dag_a}.load",
            second_load,
            "START",
            parent=a,
            inputs=[raw],
            outputs=[orders_v2],
        ),
        _run_event(clock, namespace, f"{dag_a}.load", second_load, "COMPLETE", bare=True),
        _with_nul(_run_event(clock, namespace, f"{dag_b}.notes", str(uuid.uuid4()), "START")),
        _run_event(clock, namespace, f"{dag_b}.fails", fail_run, "START", parent=b),
        _run_event(clock, namespace, f"{dag_b}.fails", fail_run, "FAIL", bare=True),
        _run_event(clock, namespace, dag_b, rb, "COMPLETE", bare=True),
    ]
    return events


def _job_event(clock: _Clock, namespace: str, job: str, **output: Any) -> dict[str, Any]:
    """A JobEvent naming the table its job writes; ``output`` adds keys to that output."""
    return {
        "eventTime": clock.tick(),
        "producer": PRODUCER,
        "schemaURL": _JOB_EVENT_SCHEMA,
        "job": {"namespace": namespace, "name": job},
        "inputs": [],
        "outputs": [{"namespace": _PG, "name": "shop.public.orders", "facets": {}, **output}],
    }


def _with_nul(event: dict[str, Any]) -> dict[str, Any]:
    event["job"]["facets"]["documentation"] = facet(
        "DocumentationJobFacet", description="copied from a C string\u0000 with its terminator"
    )
    return event


def refused_by_marquez(event: dict[str, Any]) -> bool:
    """What Marquez 0.50 answers 500 to: a JobEvent whose datasets carry run facets, or a
    NUL anywhere in a string."""
    run_facets = any("outputFacets" in d for d in event.get("outputs") or [])
    return ("run" not in event and run_facets) or "\\u0000" in json.dumps(event)
