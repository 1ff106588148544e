"""Facet rules: custom facets, strict mode, schema URL forms and versions, deletion,
user schemas from extra_schema_dir, and inputs that are not events at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proxy.validation import EventValidator, ValidationIssue
from tests.unit.validation.spec_oracle import PRODUCER, Oracle, reference_run_event, valid_run_event

SPEC = "https://openlineage.io/spec"


def _facet(schema_url: str, **body: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": schema_url, **body}


def _with_run_facet(key: str, facet: Any) -> dict[str, Any]:
    event = valid_run_event()
    event["run"]["facets"][key] = facet
    return event


def _pointers(issues: list[ValidationIssue]) -> list[str]:
    return [issue.pointer for issue in issues]


# --- custom facets -----------------------------------------------------------------


def test_unknown_facet_is_accepted_with_only_base_fields(validator: EventValidator) -> None:
    event = _with_run_facet("acme_cost", _facet("https://acme.com/CostFacet.json", dollars="x"))
    assert validator.validate(event) == []


def test_facet_pointing_at_a_core_base_type_is_a_custom_facet(validator: EventValidator) -> None:
    facet = _facet(f"{SPEC}/2-0-2/OpenLineage.json#/$defs/RunFacet", anything=[1, 2])
    assert validator.validate(_with_run_facet("mine", facet)) == []


def test_custom_facet_without_producer_is_rejected(validator: EventValidator) -> None:
    event = _with_run_facet("acme", {"_schemaURL": "https://acme.com/Acme.json"})
    assert _pointers(validator.validate(event)) == ["/run/facets/acme/_producer"]


def test_custom_facet_must_be_an_object(validator: EventValidator) -> None:
    event = _with_run_facet("acme", ["not", "an", "object"])
    assert validator.validate(event) == [
        ValidationIssue("/run/facets/acme", "facet must be an object")
    ]


# --- strict mode -------------------------------------------------------------------


def test_strict_mode_rejects_unknown_facet_naming_its_schema_url() -> None:
    url = "https://acme.com/CostFacet.json"
    issues = EventValidator(strict=True).validate(_with_run_facet("cost", _facet(url)))
    assert _pointers(issues) == ["/run/facets/cost/_schemaURL"]
    assert url in issues[0].message


def test_strict_mode_accepts_the_reference_event() -> None:
    assert EventValidator(strict=True).validate(reference_run_event()) == []


def test_misplaced_spec_facet_is_only_reported_in_strict_mode(validator: EventValidator) -> None:
    facet = _facet(
        f"{SPEC}/facets/1-0-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
        fields=[{"name": "id"}],
    )
    event = _with_run_facet("columns", facet)
    assert validator.validate(event) == []
    issues = EventValidator(strict=True).validate(event)
    assert _pointers(issues) == ["/run/facets/columns"]
    assert "SchemaDatasetFacet" in issues[0].message


def test_misplaced_spec_facet_body_is_still_checked(validator: EventValidator) -> None:
    facet = _facet(f"{SPEC}/facets/1-0-0/SchemaDatasetFacet.json", fields="id")
    assert _pointers(validator.validate(_with_run_facet("columns", facet))) == [
        "/run/facets/columns/fields"
    ]


# --- schema URL forms and versions ----------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"{SPEC}/facets/1-1-0/NominalTimeRunFacet.json#/$defs/NominalTimeRunFacet",
        f"{SPEC}/1-0-1/OpenLineage.json#/definitions/NominalTimeRunFacet",
        f"{SPEC}/facets/1-0-0/NominalTimeRunFacet.json",
        "https://raw.githubusercontent.com/OpenLineage/OpenLineage/main/spec/OpenLineage.json#/definitions/NominalTimeRunFacet",
    ],
)
def test_facet_schema_is_found_from_any_url_form(url: str, validator: EventValidator) -> None:
    good = _with_run_facet("nominalTime", _facet(url, nominalStartTime="2024-05-01T00:00:00Z"))
    bad = _with_run_facet("nominalTime", _facet(url, nominalStartTime="today"))
    assert validator.validate(good) == []
    assert _pointers(validator.validate(bad)) == ["/run/facets/nominalTime/nominalStartTime"]


def test_older_facet_versions_still_validate(validator: EventValidator) -> None:
    event = valid_run_event()
    # ParentRunFacet 1-0-0 had no "root"; ColumnLineage 1-0-0 had no "transformations".
    event["run"]["facets"]["parent"] = _facet(
        f"{SPEC}/facets/1-0-0/ParentRunFacet.json#/$defs/ParentRunFacet",
        run={"runId": "f99310b4-3c3c-1a1a-2b2b-c1b95c24ff11"},
        job={"namespace": "airflow", "name": "dag.task"},
    )
    event["outputs"][0]["facets"]["columnLineage"] = _facet(
        f"{SPEC}/facets/1-0-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet",
        fields={
            "a": {
                "inputFields": [{"namespace": "file", "name": "/in", "field": "a"}],
                "transformationDescription": "identity",
                "transformationType": "IDENTITY",
            }
        },
    )
    assert validator.validate(event) == []


def test_conventional_key_wins_over_a_mislabelled_spec_url(validator: EventValidator) -> None:
    # The spec's own example labels a datasetType facet with the DatasetVersion URL.
    url = f"{SPEC}/facets/1-0-0/DatasetVersionDatasetFacet.json"
    event = valid_run_event()
    event["inputs"][0]["facets"]["datasetType"] = _facet(url, datasetType="VIEW")
    assert validator.validate(event) == []
    event["inputs"][0]["facets"]["datasetType"] = _facet(url, datasetVersion="2")
    assert _pointers(validator.validate(event)) == ["/inputs/0/facets/datasetType/datasetType"]


def test_file_stem_with_two_definitions_is_resolved_by_container(
    validator: EventValidator,
) -> None:
    url = f"{SPEC}/facets/1-0-0/LineageFacet.json"
    event = valid_run_event()
    event["job"]["facets"]["lineage"] = _facet(url, entries=[{"type": "JOB"}])
    event["inputs"][0]["facets"]["lineage"] = _facet(url, inputs=[])
    assert validator.validate(event) == []
    event["job"]["facets"]["lineage"]["entries"] = [{"type": "TABLE"}]
    issues = validator.validate(event)
    assert _pointers(issues) == ["/job/facets/lineage/entries/0/type"]
    assert issues[0].message == "must be one of DATASET, JOB"


# --- deletion ----------------------------------------------------------------------


def test_deleted_job_and_dataset_facets_need_only_base_fields(validator: EventValidator) -> None:
    event = valid_run_event()
    event["job"]["facets"]["sql"] = _facet(f"{SPEC}/facets/1-1-0/SQLJobFacet.json", _deleted=True)
    event["inputs"][0]["facets"]["version"] = _facet(
        f"{SPEC}/facets/1-0-1/DatasetVersionDatasetFacet.json", _deleted=True
    )
    assert validator.validate(event) == []


def test_run_facets_cannot_be_deleted(validator: EventValidator) -> None:
    facet = _facet(f"{SPEC}/facets/1-1-1/ProcessingEngineRunFacet.json", _deleted=True)
    assert _pointers(validator.validate(_with_run_facet("processing_engine", facet))) == [
        "/run/facets/processing_engine/version"
    ]


# --- extra_schema_dir ----------------------------------------------------------------

_ACME_ID = "https://acme.com/schemas/1-0-0/AcmeCostRunFacet.json"


@pytest.fixture
def extra_dir(tmp_path: Path) -> Path:
    acme = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": _ACME_ID,
        "$defs": {
            "AcmeCostRunFacet": {
                "allOf": [
                    {"$ref": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet"},
                    {
                        "type": "object",
                        "properties": {"dollars": {"$ref": "#/$defs/Money"}},
                        "required": ["dollars"],
                    },
                ]
            },
            "Money": {"type": "number", "minimum": 0},
        },
    }
    legacy = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {
            "TeamRunFacet": {
                "type": "object",
                "properties": {"team": {"type": "string"}},
                "required": ["team"],
            }
        },
        "type": "object",
        "required": ["_producer", "_schemaURL", "team"],
    }
    (tmp_path / "AcmeCostRunFacet.json").write_text(json.dumps(acme))
    (tmp_path / "TeamRunFacet.json").write_text(json.dumps(legacy))
    (tmp_path / "notes.txt").write_text("not a schema")
    return tmp_path


def test_extra_schema_validates_facet_by_id_and_defs_fragment(extra_dir: Path) -> None:
    validator = EventValidator(extra_schema_dir=extra_dir)
    url = f"{_ACME_ID}#/$defs/AcmeCostRunFacet"
    assert validator.validate(_with_run_facet("cost", _facet(url, dollars=3.5))) == []
    issues = validator.validate(_with_run_facet("cost", _facet(url, dollars=-1)))
    assert _pointers(issues) == ["/run/facets/cost/dollars"]
    issues = validator.validate(_with_run_facet("cost", {"_schemaURL": url, "dollars": 1}))
    assert "/run/facets/cost/_producer" in _pointers(issues)


def test_extra_schema_matches_by_file_name_with_definitions_fragment(extra_dir: Path) -> None:
    validator = EventValidator(strict=True, extra_schema_dir=extra_dir)
    url = "https://somewhere.example/TeamRunFacet.json#/definitions/TeamRunFacet"
    assert validator.validate(_with_run_facet("team", _facet(url, team="data"))) == []
    assert _pointers(validator.validate(_with_run_facet("team", _facet(url, team=1)))) == [
        "/run/facets/team/team"
    ]


def test_extra_schema_without_fragment_uses_whole_document(extra_dir: Path) -> None:
    validator = EventValidator(extra_schema_dir=extra_dir)
    url = "https://somewhere.example/TeamRunFacet.json"
    issues = validator.validate(_with_run_facet("team", _facet(url)))
    assert _pointers(issues) == ["/run/facets/team"]


def test_extra_schema_names_are_known(extra_dir: Path) -> None:
    names = EventValidator(extra_schema_dir=extra_dir).known_facet_names()
    assert {"AcmeCostRunFacet", "TeamRunFacet", "ParentRunFacet"} <= names


# --- event kinds and garbage -----------------------------------------------------------


def _job_and_dataset_events() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A JobEvent, a DatasetEvent, and an event that is both (ambiguous, invalid)."""
    base = {
        k: v for k, v in valid_run_event().items() if k in ("eventTime", "producer", "schemaURL")
    }
    job_event = {**base, "job": {"namespace": "n", "name": "j"}, "inputs": []}
    dataset_event = {**base, "dataset": {"namespace": "n", "name": "d", "facets": {}}}
    ambiguous = {**job_event, "dataset": {"namespace": "n", "name": "d"}}
    return job_event, dataset_event, ambiguous


def test_job_and_dataset_events(validator: EventValidator) -> None:
    job_event, dataset_event, ambiguous = _job_and_dataset_events()
    for event in (job_event, dataset_event):
        assert validator.validate(event) == []
    no_namespace = {**dataset_event, "dataset": {"name": "d"}}
    assert _pointers(validator.validate(no_namespace)) == ["/dataset/namespace"]
    assert _pointers(validator.validate(ambiguous)) == ["/dataset"]


def test_official_schemas_agree_on_job_and_dataset_events(oracle: Oracle) -> None:
    job_event, dataset_event, ambiguous = _job_and_dataset_events()
    assert oracle.errors(job_event) == []
    assert oracle.errors(dataset_event) == []
    assert oracle.errors(ambiguous) != []


def test_event_without_run_job_or_dataset(validator: EventValidator) -> None:
    assert validator.validate({"eventTime": "2024-05-01T00:00:00Z"}) == [
        ValidationIssue("", "event must have run, job or dataset")
    ]


def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"run": value, "facets": [value]} if depth % 2 else [value]
    return value


@pytest.mark.parametrize(
    "garbage",
    [
        None,
        [],
        [reference_run_event()],
        "event",
        "",
        42,
        3.5,
        True,
        {"run": None, "job": None},
        {"run": {"runId": None, "facets": None}, "job": {"facets": {"x": None}}},
        {"run": {"facets": {"x": {"_producer": 1, "_schemaURL": ["a"]}}}, "job": 1},
        {
            "job": {
                "facets": {
                    "sql": {
                        "_producer": PRODUCER,
                        "_schemaURL": f"{SPEC}/facets/1-1-0/SQLJobFacet.json",
                        "query": {"a": [1]},
                    }
                }
            }
        },
        {
            "run": {
                "facets": {
                    "parent": {
                        "_producer": PRODUCER,
                        "_schemaURL": f"{SPEC}/facets/1-0-0/ParentRunFacet.json",
                        "run": _deep(50),
                    }
                }
            }
        },
        _deep(3000),
        {"run": _deep(3000), "job": _deep(3000)},
        {"inputs": [_deep(200)] * 3, "job": {}},
    ],
)
def test_garbage_produces_issues_and_never_raises(garbage: Any, validator: EventValidator) -> None:
    issues = validator.validate(garbage)
    assert issues
    assert all(isinstance(i, ValidationIssue) and isinstance(i.pointer, str) for i in issues)


def test_deeply_nested_schema_fields_do_not_raise(validator: EventValidator) -> None:
    field: dict[str, Any] = {"name": "leaf"}
    for depth in range(3000):
        field = {"name": f"f{depth}", "fields": [field]}
    event = valid_run_event()
    event["inputs"][0]["facets"]["schema"] = _facet(
        f"{SPEC}/facets/1-2-0/SchemaDatasetFacet.json", fields=[field]
    )
    issues = validator.validate(event)  # no exception, and one issue saying why
    assert [i.message for i in issues] == ["nested too deeply"]
    assert issues[0].pointer.startswith("/inputs/0/facets/schema/fields/0/fields/0")
    # A shallow copy of the same shape is valid: depth alone is what was refused.
    shallow: dict[str, Any] = {"name": "leaf"}
    for depth in range(20):
        shallow = {"name": f"f{depth}", "fields": [shallow]}
    event["inputs"][0]["facets"]["schema"]["fields"] = [shallow]
    assert validator.validate(event) == []


def test_a_facet_found_valid_before_does_not_let_a_changed_copy_through() -> None:
    """Valid facets are remembered by their JSON; any change is validated afresh."""
    validator = EventValidator()
    url = f"{SPEC}/facets/1-0-0/NominalTimeRunFacet.json#/$defs/NominalTimeRunFacet"
    valid = _facet(url, nominalStartTime="2026-11-23T00:00:00Z")
    for _ in range(2):  # the second time from the memo
        assert validator.validate(_with_run_facet("nominalTime", valid)) == []
    changed = _facet(url, nominalStartTime="2026-02-30T00:00:00Z")
    assert _pointers(validator.validate(_with_run_facet("nominalTime", changed))) == [
        "/run/facets/nominalTime/nominalStartTime"
    ]
    # The same JSON under a model that does not take it is still checked by that model.
    misplaced = _facet(f"{SPEC}/facets/1-0-0/ErrorMessageRunFacet.json", **valid)
    assert validator.validate(_with_run_facet("errorMessage", misplaced)) != []
