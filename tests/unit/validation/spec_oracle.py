"""The official-schema oracle and event builders for the validator tests.

The oracle is the official spec JSON Schemas (../shared/openlineage-spec next to the
repository) run through the reference ``jsonschema`` package, with every remote ``$ref``
served from the local files and format checking on. It is used only here, never by the
proxy. Tests that need it skip when the folder is absent — except in CI (``CI`` set),
where a missing oracle fails the run: a green CI must mean every spec check ran.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from proxy.validation.facets import Container

__all__ = [
    "Oracle",
    "facet_map_of",
    "oracle_missing",
    "reference_run_event",
    "valid_run_event",
]


RUN_ID = "f69a6e9b-9bac-3c9a-9cf6-eacb70ecc9a9"
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.23.0/integration/spark"
BASE_TYPES = {
    "RunFacet": Container.RUN,
    "JobFacet": Container.JOB,
    "DatasetFacet": Container.DATASET,
    "InputDatasetFacet": Container.INPUT,
    "OutputDatasetFacet": Container.OUTPUT,
}


def oracle_missing(reason: str) -> NoReturn:
    """Skip a test whose oracle is missing — or fail it when running in CI."""
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"{reason} (CI runs every spec check: a missing oracle fails the run)")
    pytest.skip(reason)


def valid_run_event() -> dict[str, Any]:
    """A minimal valid RunEvent with one input and one output dataset, no facets."""
    return {
        "eventTime": "2024-05-01T10:00:00.123Z",
        "eventType": "START",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": RUN_ID, "facets": {}},
        "job": {"namespace": "spark", "name": "app.job", "facets": {}},
        "inputs": [{"namespace": "file", "name": "/in", "facets": {}, "inputFacets": {}}],
        "outputs": [{"namespace": "file", "name": "/out", "facets": {}, "outputFacets": {}}],
    }


def facet_map_of(event: dict[str, Any], container: Container) -> dict[str, Any]:
    """Where a facet of ``container`` lives in ``valid_run_event()``'s shape."""
    return {
        Container.RUN: lambda: event["run"]["facets"],
        Container.JOB: lambda: event["job"]["facets"],
        Container.DATASET: lambda: event["inputs"][0]["facets"],
        Container.INPUT: lambda: event["inputs"][0]["inputFacets"],
        Container.OUTPUT: lambda: event["outputs"][0]["outputFacets"],
    }[container]()


class Oracle:
    """The official schemas: core on the event, each facet file on its facet maps."""

    def __init__(self, spec_dir: Path) -> None:
        core = json.loads((spec_dir / "OpenLineage.json").read_text())
        resources = [(core["$id"], Resource.from_contents(core))]
        self.facet_files: dict[str, dict[str, Any]] = {}
        for path in sorted((spec_dir / "facets").glob("*.json")):
            schema = json.loads(path.read_text())
            self.facet_files[path.stem] = schema
            resources.append((schema["$id"], Resource.from_contents(schema)))
        registry = Registry().with_resources(resources)
        checker = Draft202012Validator.FORMAT_CHECKER
        self.core = Draft202012Validator(core, registry=registry, format_checker=checker)
        # A facet file's top level is a schema for a facet map that binds the facet's
        # conventional key ("schema", "parent", …) to its definition.
        self.by_key: dict[tuple[Container, str], list[Draft202012Validator]] = {}
        for schema in self.facet_files.values():
            validator = Draft202012Validator(
                {"$ref": schema["$id"]}, registry=registry, format_checker=checker
            )
            for container in self.containers_of(schema):
                for key in schema["properties"]:
                    self.by_key.setdefault((container, key), []).append(validator)

    @staticmethod
    def definitions_by_container(schema: dict[str, Any]) -> dict[Container, str]:
        """Facet definitions of one official file, by the base type they extend."""
        found = {}
        for name, definition in schema["$defs"].items():
            for part in definition.get("allOf", []):
                base = part.get("$ref", "").rsplit("/", 1)[-1]
                if base in BASE_TYPES:
                    found[BASE_TYPES[base]] = name
        return found

    def containers_of(self, schema: dict[str, Any]) -> set[Container]:
        return set(self.definitions_by_container(schema))

    def errors(self, event: Any) -> list[str]:
        errors = [f"{e.json_path}: {e.message}" for e in self.core.iter_errors(event)]
        if not isinstance(event, dict):
            return errors
        for container, facets in self._facet_maps(event):
            if not isinstance(facets, dict):
                continue
            for key, facet in facets.items():
                for validator in self.by_key.get((container, key), []):
                    found = validator.iter_errors({key: facet})
                    errors += [f"{container} {e.json_path}: {e.message}" for e in found]
        return errors

    @staticmethod
    def _facet_maps(event: dict[str, Any]) -> Iterator[tuple[Container, Any]]:
        for field, container in (("run", Container.RUN), ("job", Container.JOB)):
            owner = event.get(field)
            if isinstance(owner, dict) and "facets" in owner:
                yield container, owner["facets"]
        for field, own, own_container in (
            ("inputs", "inputFacets", Container.INPUT),
            ("outputs", "outputFacets", Container.OUTPUT),
        ):
            for dataset in event.get(field) or []:
                if isinstance(dataset, dict):
                    if "facets" in dataset:
                        yield Container.DATASET, dataset["facets"]
                    if own in dataset:
                        yield own_container, dataset[own]
        dataset = event.get("dataset")
        if isinstance(dataset, dict) and "facets" in dataset:
            yield Container.DATASET, dataset["facets"]


def _facet(schema_url: str, **body: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": schema_url, **body}


_FACETS = "https://openlineage.io/spec/facets"


def reference_run_event() -> dict[str, Any]:
    """A ~2.5 KB RunEvent the size of a Spark action's: 7 standard facets (the size the
    benchmarks measure by)."""
    event = valid_run_event()
    event["eventType"] = "COMPLETE"
    event["run"]["facets"] = {
        "parent": _facet(
            f"{_FACETS}/1-1-0/ParentRunFacet.json#/$defs/ParentRunFacet",
            run={"runId": "0190f3a5-1b2c-7d3e-8f40-5a6b7c8d9e0f"},
            job={"namespace": "spark", "name": "app"},
        ),
        "processing_engine": _facet(
            f"{_FACETS}/1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet",
            version="3.5.1",
            name="spark",
            openlineageAdapterVersion="1.23.0",
        ),
    }
    event["job"]["facets"] = {
        "jobType": _facet(
            f"{_FACETS}/2-0-3/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
            processingType="BATCH",
            integration="SPARK",
            jobType="SQL_JOB",
        ),
    }
    event["inputs"][0]["facets"] = {
        "schema": _facet(
            f"{_FACETS}/1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
            fields=[
                {"name": "id", "type": "long"},
                {"name": "name", "type": "string"},
                {"name": "amount", "type": "decimal(10,2)"},
            ],
        ),
        "dataSource": _facet(
            f"{_FACETS}/1-0-1/DatasourceDatasetFacet.json#/$defs/DatasourceDatasetFacet",
            name="file",
            uri="file:///in",
        ),
    }
    event["outputs"][0]["facets"] = {
        "columnLineage": _facet(
            f"{_FACETS}/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet",
            fields={
                column: {
                    "inputFields": [
                        {
                            "namespace": "file",
                            "name": "/in",
                            "field": column,
                            "transformations": [
                                {"type": "DIRECT", "subtype": "IDENTITY", "masking": False}
                            ],
                        }
                    ]
                }
                for column in ("id", "name", "amount")
            },
        ),
    }
    event["outputs"][0]["outputFacets"] = {
        "outputStatistics": _facet(
            f"{_FACETS}/1-0-2/OutputStatisticsOutputDatasetFacet.json#/$defs/OutputStatisticsOutputDatasetFacet",
            rowCount=1000,
            size=65536,
        ),
    }
    return event
