"""The facets the official Spark integration sends, on real PySpark (issue 18, item 6):
``sql``, ``catalog``, the schema of a created table, ``spark_applicationDetails`` and
``spark_jobDetails`` — on the right events, with the official field names, and accepted
by the proxy's strict validation."""

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


def _warehouse(spark: SparkSession) -> str:
    return spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")


def _fields(dataset: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["name"], f["type"]) for f in dataset["facets"]["schema"]["fields"]]


def test_sql_create_and_insert_carry_their_sql_text_the_catalog_and_the_new_tables_schema(
    spark: SparkSession, emitter: LineageEmitter, lineage_receiver: LineageReceiver
) -> None:
    spark.sql("CREATE TABLE facets_target (id INT, label STRING) USING parquet")
    insert_sql = "INSERT INTO facets_target SELECT 1, 'a'"
    ctas_sql = "CREATE TABLE facets_copy USING parquet AS SELECT id FROM facets_target"
    try:
        spark.sql(insert_sql)
        spark.sql(ctas_sql)
        settle(emitter)
    finally:
        spark.sql("DROP TABLE facets_target")
        spark.sql("DROP TABLE facets_copy")

    location = f"{_warehouse(spark)}/facets_target"
    events = lineage_receiver.jobs_writing(location)
    create = [e for e in events if "create" in e["job"]["name"]]
    insert = [e for e in events if "insert" in e["job"]["name"]]
    assert event_types(create) == ["START", "COMPLETE"]
    assert event_types(insert) == ["START", "RUNNING", "COMPLETE"]
    for event in create + insert:
        assert VALIDATOR.validate(event) == [], event["job"]["name"]
        output = event["outputs"][0]
        catalog = output["facets"]["catalog"]
        assert (catalog["name"], catalog["type"], catalog["framework"]) == (
            "spark_catalog",
            "in-memory",
            "spark",
        )
        assert catalog["warehouseUri"].removeprefix("file:") == _warehouse(spark)
    assert {e["job"]["facets"]["sql"]["query"] for e in insert} == {insert_sql}
    ctas = lineage_receiver.jobs_writing(f"{_warehouse(spark)}/facets_copy")
    ctas = [e for e in ctas if "create" in e["job"]["name"]]
    assert ctas and {e["job"]["facets"]["sql"]["query"] for e in ctas} == {ctas_sql}
    # Spark drops a plain CREATE TABLE's text in analysis: no facet rather than a wrong one.
    assert all("sql" not in e["job"]["facets"] for e in create)
    # CREATE TABLE has no query: its output's schema is the new table's.
    assert _fields(create[-1]["outputs"][0]) == [("id", "integer"), ("label", "string")]


def test_a_dataframe_write_has_no_sql_facet(
    spark: SparkSession,
    emitter: LineageEmitter,
    lineage_receiver: LineageReceiver,
    tmp_path: Path,
) -> None:
    out = tmp_path / "api_write"
    spark.range(2).write.parquet(str(out))
    settle(emitter)
    events = lineage_receiver.jobs_writing(out)
    assert events and all("sql" not in e["job"]["facets"] for e in events)


def test_application_start_carries_the_spark_application_details(
    spark: SparkSession, emitter: LineageEmitter, lineage_receiver: LineageReceiver
) -> None:
    settle(emitter)
    [start] = [e for e in lineage_receiver.events if e["run"]["runId"] == emitter.app_run_id]
    assert VALIDATOR.validate(start) == []
    details = start["run"]["facets"]["spark_applicationDetails"]
    assert details["master"] == "local[2]"
    assert details["appName"] == "Lineage Tests"
    assert details["applicationId"] == spark.sparkContext.applicationId
    assert details["deployMode"] == "client"
    assert details["userName"] == spark.sparkContext.sparkUser()
    assert "uiWebUrl" not in details  # the tests' session runs without a UI


def test_running_event_carries_the_spark_job_details_of_the_job_that_started(
    spark: SparkSession,
    emitter: LineageEmitter,
    lineage_receiver: LineageReceiver,
    tmp_path: Path,
) -> None:
    out = tmp_path / "described"
    context = spark.sparkContext
    context.setJobGroup("nightly", "load the described table")
    try:
        spark.range(5).write.parquet(str(out))
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)
    settle(emitter)

    events = lineage_receiver.jobs_writing(out)
    running = [e for e in events if e["eventType"] == "RUNNING"]
    assert running
    details = running[0]["run"]["facets"]["spark_jobDetails"]
    assert VALIDATOR.validate(running[0]) == []
    assert isinstance(details["jobId"], int)
    assert (details["jobGroup"], details["jobDescription"]) == (
        "nightly",
        "load the described table",
    )
    # jobCallSite only when the program set Spark's callSite.short (PySpark's RDD calls do).
    others = [e for e in events if e["eventType"] != "RUNNING"]
    assert all("spark_jobDetails" not in e["run"]["facets"] for e in others)
