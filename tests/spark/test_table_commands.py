"""Table commands the emitter used to stay silent about (issue 18, item 3): TRUNCATE
TABLE, ALTER TABLE RENAME / ADD COLUMNS and INSERT OVERWRITE DIRECTORY are jobs, with
the standard lifecycle facet (TRUNCATE; RENAME with ``previousIdentifier``) and the
table's schema as it is afterwards, like the official integration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from proxy.validation import EventValidator
from spark_emitter import LineageEmitter
from tests.spark.conftest import LineageReceiver, event_types, settle

pytestmark = pytest.mark.spark

VALIDATOR = EventValidator(strict=True)


def _location(spark: SparkSession, table: str) -> str:
    return f"{spark.conf.get('spark.sql.warehouse.dir').removeprefix('file:')}/{table}"


def _command_events(receiver: LineageReceiver, location: str, word: str) -> list[dict[str, Any]]:
    events = [e for e in receiver.jobs_writing(location) if word in e["job"]["name"]]
    for event in events:
        assert VALIDATOR.validate(event) == [], event["job"]["name"]
    return events


def _fields(output: dict[str, Any]) -> list[str]:
    return [f["name"] for f in output["facets"]["schema"]["fields"]]


def test_truncate_table_is_a_job_with_the_truncate_lifecycle(
    spark: SparkSession, emitter: LineageEmitter, lineage_receiver: LineageReceiver
) -> None:
    spark.sql("CREATE TABLE cmd_truncated (id INT) USING parquet")
    try:
        spark.sql("INSERT INTO cmd_truncated SELECT 1")
        spark.sql("TRUNCATE TABLE cmd_truncated")
        settle(emitter)
    finally:
        spark.sql("DROP TABLE cmd_truncated")
    events = _command_events(
        lineage_receiver, _location(spark, "cmd_truncated"), "truncate_table_command"
    )
    assert event_types(events) == ["START", "COMPLETE"]
    output = events[-1]["outputs"][0]
    assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "TRUNCATE"
    assert output["facets"]["symlinks"]["identifiers"][0]["name"] == "default.cmd_truncated"
    assert _fields(output) == ["id"]


def test_rename_table_is_a_job_naming_the_table_it_was(
    spark: SparkSession, emitter: LineageEmitter, lineage_receiver: LineageReceiver
) -> None:
    spark.sql("CREATE TABLE cmd_before (id INT) USING parquet")
    try:
        spark.sql("ALTER TABLE cmd_before RENAME TO cmd_after")
        settle(emitter)
    finally:
        spark.sql("DROP TABLE IF EXISTS cmd_before")
        spark.sql("DROP TABLE IF EXISTS cmd_after")
    events = _command_events(lineage_receiver, _location(spark, "cmd_after"), "rename")
    assert event_types(events) == ["START", "COMPLETE"]
    lifecycle = events[-1]["outputs"][0]["facets"]["lifecycleStateChange"]
    assert lifecycle["lifecycleStateChange"] == "RENAME"
    assert lifecycle["previousIdentifier"] == {
        "namespace": "file",
        "name": _location(spark, "cmd_before"),
    }


def test_add_columns_is_a_job_with_the_tables_new_schema(
    spark: SparkSession, emitter: LineageEmitter, lineage_receiver: LineageReceiver
) -> None:
    spark.sql("CREATE TABLE cmd_widened (id INT) USING parquet")
    try:
        spark.sql("ALTER TABLE cmd_widened ADD COLUMNS (note STRING)")
        settle(emitter)
    finally:
        spark.sql("DROP TABLE cmd_widened")
    events = _command_events(lineage_receiver, _location(spark, "cmd_widened"), "add_columns")
    assert event_types(events) == ["START", "COMPLETE"]
    output = events[-1]["outputs"][0]
    assert _fields(output) == ["id", "note"]
    assert "lifecycleStateChange" not in output["facets"]


def test_insert_overwrite_directory_is_a_job_writing_the_directory(
    spark: SparkSession,
    emitter: LineageEmitter,
    lineage_receiver: LineageReceiver,
    tmp_path: Path,
) -> None:
    out = tmp_path / "exported"
    spark.sql(f"INSERT OVERWRITE DIRECTORY '{out}' USING parquet SELECT 1 AS id, 'a' AS label")
    settle(emitter)
    events = lineage_receiver.jobs_writing(out)
    assert event_types(events) == ["START", "RUNNING", "COMPLETE"]
    for event in events:
        assert VALIDATOR.validate(event) == []
    output = events[-1]["outputs"][0]
    assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    assert _fields(output) == ["id", "label"]
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 1
