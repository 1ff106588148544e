"""Partitions read or written are one dataset, named without its partition directories.

The official integration trims partition-like directories from dataset names and merges the
inputs that trim to the same name, keeping every original name in a ``subset`` facet
(``LocationSubsetCondition``) — inputs in ``inputFacets``, outputs in ``outputFacets``.
"""

from __future__ import annotations

import uuid

from proxy.validation import EventValidator
from spark_emitter.events import AppContext, action_events
from spark_emitter.execution import ExecutionFacts, ReadFacts, WriteFacts

APP = AppContext(namespace="ns", app_name="etl", app_run_id=str(uuid.uuid4()), spark_version="4.0")


def _relation(namespace: str, name: str) -> ReadFacts:
    return ReadFacts("LogicalRelation", (namespace, name))


def _complete(facts: ExecutionFacts) -> dict:
    start, complete = action_events(APP, facts)
    validator = EventValidator(strict=False)
    assert validator.validate(start) == [] and validator.validate(complete) == []
    return complete


def test_partitions_read_merge_into_one_trimmed_input_listing_their_locations() -> None:
    facts = ExecutionFacts(
        1,
        "command",
        "Execute InsertIntoHadoopFsRelationCommand",
        0,
        1,
        None,
        reads=[
            _relation("file", "/events/dt=2024-01-01"),
            _relation("file", "/events/dt=2024-01-02"),
            _relation("s3://lake", "logs/2024-01-02"),
            _relation("file", "/plain"),
        ],
        write=WriteFacts(("file", "/out/daily")),
    )
    inputs = _complete(facts)["inputs"]
    assert [(i["namespace"], i["name"]) for i in inputs] == [
        ("file", "/events"),
        ("s3://lake", "logs"),
        ("file", "/plain"),
    ]
    assert inputs[0]["inputFacets"]["subset"]["inputCondition"] == {
        "type": "location",
        "locations": ["/events/dt=2024-01-01", "/events/dt=2024-01-02"],
    }
    assert inputs[1]["inputFacets"]["subset"]["inputCondition"]["locations"] == ["logs/2024-01-02"]
    # Nothing trimmed, nothing to record.
    assert "inputFacets" not in inputs[2]


def test_a_write_into_a_partition_directory_is_the_trimmed_output_with_its_location() -> None:
    facts = ExecutionFacts(
        1,
        "command",
        "Execute InsertIntoHadoopFsRelationCommand",
        0,
        1,
        None,
        write=WriteFacts(("file", "/warehouse/events/dt=2024-01-01/hour=10")),
        rows=3,
    )
    output = _complete(facts)["outputs"][0]
    assert (output["namespace"], output["name"]) == ("file", "/warehouse/events")
    assert output["outputFacets"]["subset"]["outputCondition"] == {
        "type": "location",
        "locations": ["/warehouse/events/dt=2024-01-01/hour=10"],
    }
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 3


def test_a_read_of_several_paths_is_one_input_per_path_after_trimming() -> None:
    several = ReadFacts(
        "LogicalRelation",
        ("file", "/in/a"),
        more_datasets=[
            ("file", "/in/b"),
            ("file", "/logs/2024-01-01"),
            ("file", "/logs/2024-01-02"),
        ],
    )
    facts = ExecutionFacts(
        1,
        "command",
        "Execute InsertIntoHadoopFsRelationCommand",
        0,
        1,
        None,
        reads=[several],
        write=WriteFacts(("file", "/out")),
    )
    inputs = _complete(facts)["inputs"]
    assert [i["name"] for i in inputs] == ["/in/a", "/in/b", "/logs"]
    assert inputs[2]["inputFacets"]["subset"]["inputCondition"]["locations"] == [
        "/logs/2024-01-01",
        "/logs/2024-01-02",
    ]
