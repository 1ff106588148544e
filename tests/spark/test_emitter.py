"""The emitter on real PySpark (local mode): what a job's actions produce as events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from proxy.validation import EventValidator
from spark_emitter import LineageEmitter
from spark_emitter.events import normalize_name
from tests.spark.conftest import LineageReceiver, column_edges, event_types, settle
from tests.support.paths import REPO

pytestmark = pytest.mark.spark

# Strict: our own facets' schemas ship with the proxy, so nothing we emit is "unknown".
VALIDATOR = EventValidator(strict=True)


def _assert_valid(events: list[dict[str, Any]]) -> None:
    for event in events:
        assert VALIDATOR.validate(event) == [], event["job"]["name"]


def _write_inputs(directory: Path) -> tuple[Path, Path]:
    orders = directory / "orders.csv"
    orders.write_text("order_id,customer,amount\n1,ann,10\n2,bob,20\n3,ann,5\n")
    customers = directory / "customers.json"
    customers.write_text('{"customer":"ann","country":"NO"}\n{"customer":"bob","country":"SE"}\n')
    return orders, customers


def test_write_is_one_job_with_start_then_complete_parented_to_the_application(
    spark: SparkSession,
    emitter: LineageEmitter,
    lineage_receiver: LineageReceiver,
    tmp_path: Path,
) -> None:
    orders, _ = _write_inputs(tmp_path)
    out = tmp_path / "orders_out"
    spark.read.option("header", True).csv(str(orders)).write.mode("overwrite").parquet(str(out))
    settle(emitter)

    events = lineage_receiver.jobs_writing(out)
    assert event_types(events) == ["START", "RUNNING", "COMPLETE"]
    _assert_valid(events)
    start, complete = events[0], events[-1]
    assert {e["run"]["runId"] for e in events} == {start["run"]["runId"]}
    # UUIDv7 (Data.Rentgen refuses others) carrying the action's start time.
    for run_id in (start["run"]["runId"], emitter.app_run_id):
        assert uuid.UUID(run_id).version == 7
    started_ms = uuid.UUID(start["run"]["runId"]).int >> 80
    started = datetime.fromisoformat(start["eventTime"]).timestamp() * 1000
    assert started == pytest.approx(started_ms, abs=1)
    assert complete["job"] == start["job"]
    assert complete["job"]["namespace"] == "spark-tests"
    assert complete["job"]["name"] == (
        f"lineage_tests.execute_insert_into_hadoop_fs_relation_command.{tmp_path.name}_orders_out".lower()
    )
    assert complete["job"]["facets"]["jobType"]["jobType"] == "SQL_JOB"
    parent = complete["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == emitter.app_run_id
    assert parent["job"] == {"namespace": "spark-tests", "name": "lineage_tests"}
    assert parent["root"]["run"]["runId"] == emitter.app_run_id
    assert [(i["namespace"], i["name"]) for i in complete["inputs"]] == [("file", str(orders))]
    output = complete["outputs"][0]
    assert (output["namespace"], output["name"]) == ("file", str(out))
    assert [f["name"] for f in output["facets"]["schema"]["fields"]] == [
        "order_id",
        "customer",
        "amount",
    ]
    assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 3
    assert output["outputFacets"]["outputStatistics"]["size"] > 0
    engine = complete["run"]["facets"]["processing_engine"]
    assert (engine["name"], engine["version"]) == ("spark", spark.version)
    assert complete["run"]["facets"]["spark_properties"]["properties"]["spark.master"] == "local[2]"


def test_application_start_was_sent_once_with_jobtype_application(
    emitter: LineageEmitter, lineage_receiver: LineageReceiver
) -> None:
    settle(emitter)
    app_events = [e for e in lineage_receiver.events if e["run"]["runId"] == emitter.app_run_id]
    assert [e["eventType"] for e in app_events] == ["START"]
    _assert_valid(app_events)
    job_type = app_events[0]["job"]["facets"]["jobType"]
    assert (job_type["jobType"], job_type["integration"]) == ("APPLICATION", "SPARK")


def test_join_and_aggregate_have_column_lineage(
    spark: SparkSession,
    emitter: LineageEmitter,
    lineage_receiver: LineageReceiver,
    tmp_path: Path,
) -> None:
    orders_path, customers_path = _write_inputs(tmp_path)
    orders = spark.read.option("header", True).option("inferSchema", True).csv(str(orders_path))
    customers = spark.read.json(str(customers_path))
    totals = (
        orders.join(customers, "customer")
        .filter(F.col("amount") > 1)
        .groupBy("country")
        .agg(F.sum("amount").alias("total"), F.upper(F.first("customer")).alias("who"))
    )
    out = tmp_path / "totals"
    totals.write.parquet(str(out))
    settle(emitter)

    complete = lineage_receiver.jobs_writing(out)[-1]
    _assert_valid([complete])
    output = complete["outputs"][0]
    country = ("customers.json", "country", "DIRECT/IDENTITY")
    assert column_edges(output, "country", "DIRECT") == {country}
    assert column_edges(output, "total", "DIRECT") == {
        ("orders.csv", "amount", "DIRECT/AGGREGATION")
    }
    assert column_edges(output, "who", "DIRECT") == {
        ("orders.csv", "customer", "DIRECT/AGGREGATION")
    }
    # As the official integration by default: what decides the rows is listed once, at
    # dataset level, and in no field — with the optimizer's isnotnull on the join keys.
    assert column_edges(output, None) == {
        ("orders.csv", "customer", "INDIRECT/JOIN"),
        ("customers.json", "customer", "INDIRECT/JOIN"),
        ("orders.csv", "amount", "INDIRECT/FILTER"),
        ("orders.csv", "customer", "INDIRECT/FILTER"),
        ("customers.json", "customer", "INDIRECT/FILTER"),
        ("customers.json", "country", "INDIRECT/GROUP_BY"),
    }
    for name in ("country", "total", "who"):
        assert column_edges(output, name, "INDIRECT") == set()
    # A new path written without overwrite: no lifecycle change is claimed.
    assert "lifecycleStateChange" not in output["facets"]
    # Statistics are found under adaptive execution's wrapping too.
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 2


def test_show_first_and_count_on_cached_data_are_not_jobs_but_writes_from_cache_are(
    spark: SparkSession,
    emitter: LineageEmitter,
    lineage_receiver: LineageReceiver,
    tmp_path: Path,
) -> None:
    orders_path, _ = _write_inputs(tmp_path)
    orders = spark.read.option("header", True).csv(str(orders_path)).cache()
    orders.count()
    orders.show()
    orders.first()
    orders.count()
    out = tmp_path / "from_cache"
    orders.write.parquet(str(out))
    settle(emitter)
    orders.unpersist()

    reading = lineage_receiver.jobs_reading(orders_path)
    assert event_types(reading) == ["START", "RUNNING", "COMPLETE"]
    assert reading == lineage_receiver.jobs_writing(out)
    # The cached relation stands for the file it was filled from.
    assert [i["name"] for i in reading[-1]["inputs"]] == [str(orders_path)]


def test_failing_write_is_reported_as_fail_with_the_error(
    spark: SparkSession,
    emitter: LineageEmitter,
    lineage_receiver: LineageReceiver,
    tmp_path: Path,
) -> None:
    orders_path, _ = _write_inputs(tmp_path)
    out = tmp_path / "never_written"
    frame = spark.read.option("header", True).csv(str(orders_path))
    with pytest.raises(Exception, match="amount too large"):
        frame.select(F.raise_error(F.lit("amount too large"))).write.parquet(str(out))
    settle(emitter)

    events = lineage_receiver.jobs_writing(out)
    assert event_types(events) == ["START", "RUNNING", "FAIL"]
    _assert_valid(events)
    error = events[-1]["run"]["facets"]["errorMessage"]
    assert "amount too large" in error["message"]
    assert "amount too large" in error["stackTrace"]
    assert "outputStatistics" not in events[-1]["outputs"][0].get("outputFacets", {})


def test_a_failing_callback_never_reaches_the_job(
    spark: SparkSession,
    emitter: LineageEmitter,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("plan reader bug")

    monkeypatch.setattr("spark_emitter.listener.read_execution", broken)
    before = emitter.callback_failures
    orders, _ = _write_inputs(tmp_path)
    out = tmp_path / "still_written"
    spark.read.option("header", True).csv(str(orders)).write.parquet(str(out))
    settle(emitter)
    assert spark.read.parquet(str(out)).count() == 3
    # Every execution of the job (the CSV header read too) failed to be described.
    assert emitter.callback_failures > before


EXIT_WITHOUT_STOP = """
import sys
from pyspark.sql import SparkSession
from spark_emitter import enable_lineage

spark = (
    SparkSession.builder.master("local[1]").appName("No Stop")
    .config("spark.openlineage.transport.type", "file")
    .config("spark.openlineage.transport.location", sys.argv[1])
    .getOrCreate()
)
enable_lineage(spark, namespace="exit-test")
spark.range(5).write.parquet(sys.argv[2])
# no spark.stop(): the interpreter just exits
"""


def test_application_complete_is_sent_when_the_script_exits_without_stopping_spark(
    tmp_path: Path,
) -> None:
    """Also the file transport of the openlineage-python client, configured by Spark conf
    alone: every event a line of one file, schema-valid."""
    script = tmp_path / "no_stop.py"
    script.write_text(EXIT_WITHOUT_STOP)
    out, lineage = tmp_path / "numbers", tmp_path / "lineage.jsonl"
    completed = subprocess.run(
        [sys.executable, str(script), str(lineage), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    events = [json.loads(line) for line in lineage.read_text().splitlines()]
    assert [VALIDATOR.validate(e) for e in events] == [[]] * len(events)
    write = "no_stop.execute_insert_into_hadoop_fs_relation_command." + normalize_name(
        f"{tmp_path.name}_numbers"
    )
    assert {e["job"]["name"] for e in events} == {"no_stop", write}
    assert [(e["job"]["name"], e["eventType"]) for e in (events[0], events[-1])] == [
        ("no_stop", "START"),
        ("no_stop", "COMPLETE"),
    ]
    assert event_types(events[1:-1]) == ["START", "RUNNING", "COMPLETE"]
