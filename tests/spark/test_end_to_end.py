"""The example pipeline, end to end: PySpark + emitter → proxy → Kafka, every event in
order in one partition, and the Spark jobs over the archive the proxy wrote.

The next leg, Kafka → ``lineage-proxy consume`` → the real Marquez server, is run on this
same pipeline by tests/integration/marquez/test_same_as_direct.py, which compares what
Marquez shows with what it shows when the events are POSTed to it directly.

The pipeline runs as its own process (its own JVM), exactly as a user runs it, so the
application's end, the listener-bus drain and the send-queue drain at exit are real.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from pyspark.sql import SparkSession

from proxy.kafka.order_stamp import ORDER_HEADER
from proxy.validation import EventValidator
from spark_emitter.archive_jobs.compact import compact
from spark_emitter.archive_jobs.graph import build_graph
from tests.spark.conftest import column_edges, event_types
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.paths import REPO

pytestmark = pytest.mark.spark

APP = "sales_etl"
WRITE = "execute_insert_into_hadoop_fs_relation_command"
# saveAsTable is named after the CREATE TABLE AS SELECT it runs (Spark 4 nests it in its own
# SaveAsV1TableCommand; Spark 3.5 plans it directly), as the official integration names it.
SAVE_AS_TABLE = "execute_create_data_source_table_as_select_command"


async def _run_pipeline(url: str, workdir: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        "OPENLINEAGE_URL": url,
        "OPENLINEAGE_NAMESPACE": "e2e",
        "PYTHONPATH": str(REPO),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "spark_emitter.examples.etl_pipeline",
        "--workdir",
        str(workdir),
        env=env,
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=600)
    assert process.returncode == 0, stderr.decode()[-3000:]
    return orjson.loads(stdout)


def _by_run(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        runs[event["run"]["runId"]].append(event)
    return runs


def _one_run(events: list[dict[str, Any]], job_name: str) -> list[dict[str, Any]]:
    runs = [r for r in _by_run(events).values() if r[0]["job"]["name"] == job_name]
    assert len(runs) == 1, job_name
    return runs[0]


async def test_example_pipeline_lineage_reaches_kafka_in_order_and_the_archive(
    start_proxy, broker, topic, tmp_path: Path, spark: SparkSession
) -> None:
    workdir = tmp_path / "etl"
    async with start_proxy(routing={"archive_root": tmp_path / "archive"}) as url:
        summary = await _run_pipeline(url, workdir)
    sent = summary["lineage"]["sent"]
    assert summary["lineage"]["failed"] == summary["lineage"]["dropped"] == 0
    records = await asyncio.to_thread(read_all_produced_so_far, broker.bootstrap_servers, topic)
    # Each run is keyed by its runId: one partition per run, in emission order (offsets).
    partitions: dict[str, set[int]] = {}
    for record in records:
        partitions.setdefault(orjson.loads(record.value)["run"]["runId"], set()).add(
            record.partition
        )
    assert all(len(held) == 1 for held in partitions.values()), partitions
    events = [orjson.loads(r.value) for r in sorted(records, key=lambda r: r.offset)]
    assert len(events) == sent
    validator = EventValidator(strict=False)
    assert [validator.validate(e) for e in events] == [[]] * len(events)

    app_run = summary["lineage"]["application_run_id"]
    app_events = _by_run(events)[app_run]
    assert [e["eventType"] for e in app_events] == ["START", "COMPLETE"]
    # The official Spark integration's application job: jobType APPLICATION, integration
    # SPARK (the jar's jobType facet), written out here rather than read back from the event.
    for app_event in app_events:
        job = app_event["job"]
        assert (job["namespace"], job["name"], list(job["facets"])) == ("e2e", APP, ["jobType"])
        job_type = job["facets"]["jobType"]
        assert {k: job_type[k] for k in ("processingType", "integration", "jobType")} == {
            "processingType": "BATCH",
            "integration": "SPARK",
            "jobType": "APPLICATION",
        }
        assert job_type["_schemaURL"].endswith("JobTypeJobFacet.json#/$defs/JobTypeJobFacet")
    # The proxy took the application's START first and its COMPLETE last: their order
    # stamps (what consumers merge partitions by) are the lowest and the highest.
    stamps = sorted(records, key=lambda r: int(r.headers[ORDER_HEADER]))
    first, last = (orjson.loads(stamps[i].value) for i in (0, -1))
    assert (first, last) == (app_events[0], app_events[1])

    names = {e["job"]["name"] for e in events}
    assert names == {
        APP,
        f"{APP}.{WRITE}.staging_orders",
        f"{APP}.{WRITE}.staging_customers",
        f"{APP}.{WRITE}.marts_daily_revenue",
        f"{APP}.{SAVE_AS_TABLE}.default_customer_rank",
        f"{APP}.{WRITE}.marts_refunds",
        f"{APP}.execute_create_data_source_table_as_select_command.default_scratch_orders",
        f"{APP}.drop_table.warehouse_scratch_orders",
    }
    for run_id, run in _by_run(events).items():
        # An action that ran Spark jobs also said RUNNING between its START and its end.
        assert event_types(run) in (
            ["START", "COMPLETE"],
            ["START", "FAIL"],
            ["START", "RUNNING", "COMPLETE"],
            ["START", "RUNNING", "FAIL"],
        )
        if run_id != app_run:
            parent = run[-1]["run"]["facets"]["parent"]
            assert parent["run"]["runId"] == app_run
            assert parent["job"] == {"namespace": "e2e", "name": APP}
            assert parent["root"]["run"]["runId"] == app_run

    orders = _one_run(events, f"{APP}.{WRITE}.staging_orders")[-1]
    assert sorted(Path(i["name"]).name for i in orders["inputs"]) == [
        "orders_eu.csv",
        "orders_us.csv",
    ]
    # Union of the two files: each output column comes from both.
    assert column_edges(orders["outputs"][0], "amount", "DIRECT") == {
        ("orders_eu.csv", "amount", "DIRECT/TRANSFORMATION"),
        ("orders_us.csv", "amount", "DIRECT/TRANSFORMATION"),
    }

    daily = _one_run(events, f"{APP}.{WRITE}.marts_daily_revenue")[-1]
    assert daily["eventType"] == "COMPLETE"
    assert sorted(i["name"] for i in daily["inputs"]) == sorted(
        [summary["outputs"]["customers"], summary["outputs"]["orders"]]
    )
    output = daily["outputs"][0]
    assert output["name"] == summary["outputs"]["daily_revenue"]
    aggregated = ("orders", "amount", "DIRECT/AGGREGATION")
    assert column_edges(output, "revenue", "DIRECT") == {aggregated}
    assert column_edges(output, "country", "DIRECT") == {
        ("customers", "country", "DIRECT/IDENTITY")
    }
    # What decides the rows, once at dataset level (the official default shape).
    assert {
        ("orders", "customer_id", "INDIRECT/JOIN"),
        ("customers", "customer_id", "INDIRECT/JOIN"),
        ("orders", "status", "INDIRECT/FILTER"),
        ("customers", "country", "INDIRECT/GROUP_BY"),
    } <= column_edges(output, None, "INDIRECT")
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 5

    ranked = _one_run(events, f"{APP}.{SAVE_AS_TABLE}.default_customer_rank")
    table = ranked[-1]["outputs"][0]
    assert table["facets"]["symlinks"]["identifiers"][0]["name"] == "default.customer_rank"
    assert column_edges(table, "rank") >= {("orders", "amount", "INDIRECT/WINDOW")}

    refunds = _one_run(events, f"{APP}.{WRITE}.marts_refunds")
    assert event_types(refunds) == ["START", "RUNNING", "FAIL"]
    assert "negative amount" in refunds[-1]["run"]["facets"]["errorMessage"]["message"]

    dropped = _one_run(events, f"{APP}.drop_table.warehouse_scratch_orders")[-1]
    assert dropped["outputs"][0]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == (
        "DROP"
    )

    # The proxy archived the same events (default rules: Kafka and the archive); the
    # archive jobs read what it wrote.
    archive = str(tmp_path / "archive" / "events")
    compacted = compact(spark, archive, str(tmp_path / "compacted"))
    assert (compacted.read, compacted.added) == (sent, sent)
    graph = build_graph(spark, archive, str(tmp_path / "graph"))
    assert graph.counts["runs"] == len(_by_run(events))
    assert graph.states == {"COMPLETE": len(_by_run(events)) - 1, "FAIL": 1}
    columns = spark.read.parquet(str(tmp_path / "graph" / "column_edges"))
    revenue = columns.filter(
        f"output_name = '{summary['outputs']['daily_revenue']}' AND output_field = 'revenue'"
        " AND transformation_type = 'DIRECT'"
    ).collect()
    assert [(r.input_field, r.transformation_subtype) for r in revenue] == [
        ("amount", "AGGREGATION")
    ]
    runs = spark.read.parquet(str(tmp_path / "graph" / "runs"))
    children = runs.filter(f"parent_run_id = '{app_run}'").count()
    assert children == len(_by_run(events)) - 1
