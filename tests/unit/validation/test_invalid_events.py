"""Invalid events: each mutation is rejected at the expected pointer, and the official
schemas (the oracle) reject it too."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from proxy.validation import EventValidator
from tests.unit.validation.spec_oracle import Oracle, reference_run_event

Event = dict[str, Any]


def _set(path: str, value: Any) -> Callable[[Event], None]:
    *parents, last = path.split(".")

    def mutate(event: Event) -> None:
        target: Any = event
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        target[last] = value

    return mutate


def _delete(path: str) -> Callable[[Event], None]:
    *parents, last = path.split(".")

    def mutate(event: Event) -> None:
        target: Any = event
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        del target[last]

    return mutate


_LINEAGE = "outputs.0.facets.columnLineage.fields.id.inputFields.0"
_CUSTOM = {"_producer": "https://example.com/p", "_schemaURL": "https://example.com/c.json"}

MUTATIONS: list[tuple[str, Callable[[Event], None], str]] = [
    ("missing runId", _delete("run.runId"), "/run/runId"),
    ("runId not a UUID", _set("run.runId", "run-42"), "/run/runId"),
    ("runId without dashes", _set("run.runId", "f69a6e9b9bac3c9a9cf6eacb70ecc9a9"), "/run/runId"),
    ("eventTime not a time", _set("eventTime", "yesterday"), "/eventTime"),
    ("eventTime a number", _set("eventTime", 1714557600), "/eventTime"),
    ("eventTime without offset", _set("eventTime", "2024-05-01T10:00:00"), "/eventTime"),
    ("eventTime 30 February", _set("eventTime", "2024-02-30T10:00:00Z"), "/eventTime"),
    ("eventType unknown", _set("eventType", "DONE"), "/eventType"),
    ("missing producer", _delete("producer"), "/producer"),
    ("producer not a URI", _set("producer", "my spark job"), "/producer"),
    ("missing schemaURL", _delete("schemaURL"), "/schemaURL"),
    ("missing job name", _delete("job.name"), "/job/name"),
    ("job namespace a number", _set("job.namespace", 5), "/job/namespace"),
    ("inputs not an array", _set("inputs", {}), "/inputs"),
    ("input without namespace", _delete("inputs.0.namespace"), "/inputs/0/namespace"),
    (
        "facet missing _producer",
        _delete("run.facets.parent._producer"),
        "/run/facets/parent/_producer",
    ),
    (
        "facet _schemaURL not a URI",
        _set("job.facets.jobType._schemaURL", "JobTypeJobFacet"),
        "/job/facets/jobType/_schemaURL",
    ),
    ("run facets not an object", _set("run.facets", []), "/run/facets"),
    ("facet not an object", _set("run.facets.parent", "parent"), "/run/facets/parent"),
    (
        "parent runId not a UUID",
        _set("run.facets.parent.run.runId", "x"),
        "/run/facets/parent/run/runId",
    ),
    ("parent without job", _delete("run.facets.parent.job"), "/run/facets/parent/job"),
    (
        "processing_engine without version",
        _delete("run.facets.processing_engine.version"),
        "/run/facets/processing_engine/version",
    ),
    (
        "jobType without integration",
        _delete("job.facets.jobType.integration"),
        "/job/facets/jobType/integration",
    ),
    (
        "schema fields not a list",
        _set("inputs.0.facets.schema.fields", "id,name"),
        "/inputs/0/facets/schema/fields",
    ),
    (
        "schema field without name",
        _delete("inputs.0.facets.schema.fields.1.name"),
        "/inputs/0/facets/schema/fields/1/name",
    ),
    (
        "schema field type a number",
        _set("inputs.0.facets.schema.fields.2.type", 7),
        "/inputs/0/facets/schema/fields/2/type",
    ),
    (
        "dataSource uri not a URI",
        _set("inputs.0.facets.dataSource.uri", "in put"),
        "/inputs/0/facets/dataSource/uri",
    ),
    (
        "columnLineage transformation type not a string",
        _set(f"{_LINEAGE}.transformations.0.type", 1),
        f"/{_LINEAGE.replace('.', '/')}/transformations/0/type",
    ),
    (
        "columnLineage transformation without type",
        _delete(f"{_LINEAGE}.transformations.0.type"),
        f"/{_LINEAGE.replace('.', '/')}/transformations/0/type",
    ),
    (
        "columnLineage input without field",
        _delete(f"{_LINEAGE}.field"),
        f"/{_LINEAGE.replace('.', '/')}/field",
    ),
    (
        "outputStatistics rowCount a string",
        _set("outputs.0.outputFacets.outputStatistics.rowCount", "1000"),
        "/outputs/0/outputFacets/outputStatistics/rowCount",
    ),
    (
        "job facet _deleted not a boolean",
        _set("job.facets.jobType._deleted", "yes"),
        "/job/facets/jobType/_deleted",
    ),
    (
        "custom facet without _schemaURL",
        _set("run.facets.custom", {"_producer": "https://example.com/p"}),
        "/run/facets/custom/_schemaURL",
    ),
    (
        "facet key with slash and tilde is escaped",
        _set("run.facets.a/b~c", {"_schemaURL": "https://example.com/c.json"}),
        "/run/facets/a~1b~0c/_producer",
    ),
    (
        "lifecycleStateChange unknown state",
        _set(
            "outputs.0.facets.lifecycleStateChange",
            {
                **_CUSTOM,
                "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/LifecycleStateChangeDatasetFacet.json#/$defs/LifecycleStateChangeDatasetFacet",
                "lifecycleStateChange": "MOVE",
            },
        ),
        "/outputs/0/facets/lifecycleStateChange/lifecycleStateChange",
    ),
    (
        "nominalTime start not a date-time",
        _set(
            "run.facets.nominalTime",
            {
                **_CUSTOM,
                "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/NominalTimeRunFacet.json#/$defs/NominalTimeRunFacet",
                "nominalStartTime": "2024-05-01",
            },
        ),
        "/run/facets/nominalTime/nominalStartTime",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "pointer"), [m[1:] for m in MUTATIONS], ids=[m[0] for m in MUTATIONS]
)
def test_invalid_event_is_rejected_at_its_pointer(
    mutate: Callable[[Event], None], pointer: str, validator: EventValidator
) -> None:
    event = reference_run_event()
    mutate(event)
    issues = validator.validate(event)
    assert pointer in [issue.pointer for issue in issues], issues
    assert all(issue.message for issue in issues)


@pytest.mark.parametrize("mutate", [m[1] for m in MUTATIONS], ids=[m[0] for m in MUTATIONS])
def test_official_schemas_agree_the_mutation_is_invalid(
    mutate: Callable[[Event], None], oracle: Oracle
) -> None:
    event = reference_run_event()
    mutate(event)
    assert oracle.errors(event) != []


def test_reference_event_is_valid(validator: EventValidator) -> None:
    assert validator.validate(reference_run_event()) == []


def test_official_schemas_agree_the_reference_event_is_valid(oracle: Oracle) -> None:
    assert oracle.errors(reference_run_event()) == []


def test_all_issues_are_reported_not_just_the_first(validator: EventValidator) -> None:
    event = reference_run_event()
    del event["run"]["runId"]
    event["eventType"] = "DONE"
    event["inputs"][0]["facets"]["schema"]["fields"] = "x"
    pointers = {issue.pointer for issue in validator.validate(event)}
    assert {"/run/runId", "/eventType", "/inputs/0/facets/schema/fields"} <= pointers


def test_issues_are_capped(validator: EventValidator) -> None:
    event = reference_run_event()
    event["inputs"] = [{"name": 1} for _ in range(200)]
    assert len(validator.validate(event)) == 50


def test_messages_are_short_and_human(validator: EventValidator) -> None:
    event = copy.deepcopy(reference_run_event())
    event["eventType"] = "DONE"
    event["run"]["runId"] = "x"
    del event["job"]["name"]
    messages = {issue.pointer: issue.message for issue in validator.validate(event)}
    assert messages == {
        "/eventType": "must be one of START, RUNNING, COMPLETE, ABORT, FAIL, OTHER",
        "/run/runId": "not a valid UUID",
        "/job/name": "field required",
    }
