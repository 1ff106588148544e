"""Valid OpenLineage events to build tests on; each call returns a fresh dict."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

PRODUCER = "https://github.com/lineage-proxy/tests"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
FACETS = "https://openlineage.io/spec/facets"


def now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def one_run(
    name: str, event_types: list[str], *, namespace: str = "team-a"
) -> list[dict[str, Any]]:
    """The events of one run (one runId, hence one Kafka key), each with an eventTime of
    its own (a millisecond apart), to be sent one after another: tell them apart with
    :func:`event_identity`."""
    run_id = str(uuid.uuid4())
    start = datetime.now(UTC)
    events = []
    for i, event_type in enumerate(event_types):
        event = run_event(namespace=namespace, name=name, event_type=event_type, run_id=run_id)
        event["eventTime"] = (start + timedelta(milliseconds=i)).isoformat().replace("+00:00", "Z")
        events.append(event)
    return events


def event_identity(event: dict[str, Any]) -> str:
    """One event among its run's: ``{runId}@{eventTime}``."""
    return f"{event['run']['runId']}@{event['eventTime']}"


def facet(facet_type: str, spec_version: str = "1-0-0", /, **fields: Any) -> dict[str, Any]:
    """A standard facet of ``facet_type`` (e.g. "SchemaDatasetFacet") with ``fields``."""
    return {
        "_producer": PRODUCER,
        "_schemaURL": f"{FACETS}/{spec_version}/{facet_type}.json#/$defs/{facet_type}",
        **fields,
    }


def run_event(
    *,
    namespace: str = "team-a",
    name: str = "etl.daily",
    event_type: str = "START",
    run_id: str | None = None,
    parent: tuple[str, str, str] | None = None,
    root: tuple[str, str, str] | None = None,
) -> dict[str, Any]:
    """A RunEvent; ``parent``/``root`` are (namespace, name, runId)."""
    run_facets: dict[str, Any] = {}
    if parent is not None:
        parent_facet = facet(
            "ParentRunFacet",
            "1-1-0",
            job={"namespace": parent[0], "name": parent[1]},
            run={"runId": parent[2]},
        )
        if root is not None:
            parent_facet["root"] = {
                "job": {"namespace": root[0], "name": root[1]},
                "run": {"runId": root[2]},
            }
        run_facets["parent"] = parent_facet
    return {
        "eventType": event_type,
        "eventTime": now(),
        "producer": PRODUCER,
        "schemaURL": SCHEMA_URL,
        "run": {"runId": run_id or str(uuid.uuid4()), "facets": run_facets},
        "job": {"namespace": namespace, "name": name, "facets": {}},
        "inputs": [],
        "outputs": [],
    }


def rich_run_event(**kwargs: Any) -> dict[str, Any]:
    """A RunEvent with standard facets on run, job and datasets (about 2.5 KB)."""
    event = run_event(**kwargs)
    event["run"]["facets"]["nominalTime"] = facet(
        "NominalTimeRunFacet", nominalStartTime="2026-11-23T00:00:00Z"
    )
    event["run"]["facets"]["processing_engine"] = facet(
        "ProcessingEngineRunFacet", "1-1-1", version="3.5.1", name="spark"
    )
    event["job"]["facets"]["jobType"] = facet(
        "JobTypeJobFacet", "2-0-2", processingType="BATCH", integration="SPARK", jobType="SQL_JOB"
    )
    event["job"]["facets"]["sql"] = facet(
        "SQLJobFacet", query="INSERT INTO sales.daily SELECT * FROM raw.orders WHERE ok"
    )
    fields = [
        {"name": "order_id", "type": "long"},
        {"name": "amount", "type": "decimal(10,2)"},
        {"name": "day", "type": "date"},
    ]
    event["inputs"] = [
        {
            "namespace": "s3://raw-bucket",
            "name": "orders",
            "facets": {
                "schema": facet("SchemaDatasetFacet", "1-1-1", fields=fields),
                "dataSource": facet(
                    "DatasourceDatasetFacet", name="s3://raw-bucket", uri="s3://raw-bucket"
                ),
            },
        }
    ]
    event["outputs"] = [
        {
            "namespace": "hive://metastore:9083",
            "name": "sales.daily",
            "facets": {
                "schema": facet("SchemaDatasetFacet", "1-1-1", fields=fields),
                "columnLineage": facet(
                    "ColumnLineageDatasetFacet",
                    "1-2-0",
                    fields={
                        "amount": {
                            "inputFields": [
                                {
                                    "namespace": "s3://raw-bucket",
                                    "name": "orders",
                                    "field": "amount",
                                    "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}],
                                }
                            ]
                        }
                    },
                ),
            },
            "outputFacets": {
                "outputStatistics": facet(
                    "OutputStatisticsOutputDatasetFacet", "1-0-2", rowCount=10, size=1024
                )
            },
        }
    ]
    return event


def job_event(namespace: str = "team-a", name: str = "etl.daily") -> dict[str, Any]:
    return {
        "eventTime": now(),
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
        "job": {"namespace": namespace, "name": name, "facets": {}},
        "inputs": [],
        "outputs": [],
    }


def dataset_event(namespace: str = "s3://bucket", name: str = "path/x") -> dict[str, Any]:
    return {
        "eventTime": now(),
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {"namespace": namespace, "name": name, "facets": {}},
    }
