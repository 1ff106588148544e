"""Job and dataset names on real PySpark match the official Spark integration's (issue 18).

Switching from openlineage-spark to this emitter (or back) must not split a job's history:
the same action gets the same job name and the same datasets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_emitter import LineageEmitter
from tests.spark.conftest import LineageReceiver, column_edges, event_types, settle

pytestmark = pytest.mark.spark

INSERT = "lineage_tests.execute_insert_into_hadoop_fs_relation_command"


def _runs_named(receiver: LineageReceiver, name: str) -> list[dict[str, Any]]:
    return [e for e in receiver.events if e["job"]["name"] == name]


def test_insert_into_table_and_into_partition_directory_have_the_official_job_names(
    spark: SparkSession,
    emitter: LineageEmitter,
    lineage_receiver: LineageReceiver,
    tmp_path: Path,
) -> None:
    spark.sql("CREATE TABLE names_insert_target (id INT, label STRING) USING parquet")
    try:
        spark.sql("INSERT INTO names_insert_target SELECT 1, 'a'")
        partition = tmp_path / "events" / "dt=2024-01-01"
        spark.range(3).write.parquet(str(partition))
        settle(emitter)
    finally:
        spark.sql("DROP TABLE names_insert_target")

    # INSERT INTO a table: the last two parts of the table's location (warehouse/table).
    warehouse = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")).name
    insert = _runs_named(lineage_receiver, f"{INSERT}.{warehouse}_names_insert_target")
    assert event_types(insert) == ["START", "RUNNING", "COMPLETE"]
    # A partition directory written directly: named by the dataset's directory.
    partition_write = _runs_named(lineage_receiver, f"{INSERT}.{tmp_path.name}_events")
    assert event_types(partition_write) == ["START", "RUNNING", "COMPLETE"]


def test_partition_directories_read_and_written_are_named_by_their_dataset(
    spark: SparkSession,
    emitter: LineageEmitter,
    lineage_receiver: LineageReceiver,
    tmp_path: Path,
) -> None:
    days = [tmp_path / "events" / f"dt=2024-01-0{day}" for day in (1, 2)]
    for day in days:
        spark.range(2).write.parquet(str(day))
    first, second = (spark.read.parquet(str(day)) for day in days)
    daily = tmp_path / "daily" / "dt=2024-01-02"
    first.union(second).write.parquet(str(daily))
    settle(emitter)

    events = lineage_receiver.jobs_writing(tmp_path / "daily")
    assert event_types(events) == ["START", "RUNNING", "COMPLETE"]
    start, complete = events[0], events[-1]
    assert start["job"]["name"] == complete["job"]["name"] == f"{INSERT}.{tmp_path.name}_daily"
    assert [i["name"] for i in complete["inputs"]] == [str(tmp_path / "events")]
    condition = complete["inputs"][0]["inputFacets"]["subset"]["inputCondition"]
    assert condition == {"type": "location", "locations": [str(day) for day in days]}
    output = complete["outputs"][0]
    assert output["outputFacets"]["subset"]["outputCondition"]["locations"] == [str(daily)]


def test_every_root_path_of_a_multi_path_or_glob_read_is_an_input(
    spark: SparkSession,
    emitter: LineageEmitter,
    lineage_receiver: LineageReceiver,
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    days = [tmp_path / "logs" / day for day in ("2024-01-01", "2024-01-02")]
    for directory in (first, second, *days):
        spark.range(2).repartition(2).write.json(str(directory))
    spark.read.json([str(first), str(second)]).write.parquet(str(tmp_path / "from_list"))
    spark.read.json(str(tmp_path / "logs" / "*")).write.parquet(str(tmp_path / "from_glob"))
    files = sorted(str(f) for f in first.glob("part-*.json"))
    assert len(files) == 2
    spark.read.json(files).write.parquet(str(tmp_path / "from_files"))
    settle(emitter)

    def inputs_of(output: str) -> list[dict[str, Any]]:
        events = lineage_receiver.jobs_writing(tmp_path / output)
        assert all(e["inputs"] == events[-1]["inputs"] for e in events)
        return events[-1]["inputs"]

    from_list = lineage_receiver.jobs_writing(tmp_path / "from_list")[-1]
    assert [i["name"] for i in from_list["inputs"]] == [str(first), str(second)]
    assert column_edges(from_list["outputs"][0], "id") == {
        ("a", "id", "DIRECT/IDENTITY"),
        ("b", "id", "DIRECT/IDENTITY"),
    }
    # Two date directories through a glob: one dataset, both directories in its subset.
    (logs,) = inputs_of("from_glob")
    assert logs["name"] == str(tmp_path / "logs")
    assert logs["inputFacets"]["subset"]["inputCondition"]["locations"] == [str(d) for d in days]
    # Several files: each stands for its directory, as in the official integration.
    assert [i["name"] for i in inputs_of("from_files")] == [str(first)]


def test_count_and_collect_without_output_are_not_jobs_by_default(
    spark: SparkSession,
    emitter: LineageEmitter,
    lineage_receiver: LineageReceiver,
    tmp_path: Path,
) -> None:
    source = tmp_path / "numbers"
    spark.range(5).write.parquet(str(source))
    frame = spark.read.parquet(str(source))
    assert frame.count() == 5
    assert len(frame.filter("id > 1").collect()) == 3
    out = tmp_path / "copied"
    frame.write.parquet(str(out))
    settle(emitter)

    # Only the write that reads the data is a job; no <app>.adaptive_spark_plan runs.
    reading = lineage_receiver.jobs_reading(source)
    assert reading == lineage_receiver.jobs_writing(out)
    assert event_types(reading) == ["START", "RUNNING", "COMPLETE"]


def test_save_as_table_is_the_create_table_as_select_it_runs_as_the_official_names_it(
    spark: SparkSession,
    emitter: LineageEmitter,
    lineage_receiver: LineageReceiver,
    tmp_path: Path,
) -> None:
    source = tmp_path / "ranked"
    spark.range(3).write.parquet(str(source))
    frame = spark.read.parquet(str(source))
    try:
        frame.write.saveAsTable("names_saved")  # a new table
        frame.write.mode("overwrite").saveAsTable("names_saved")  # dropped and made anew
        settle(emitter)
    finally:
        spark.sql("DROP TABLE IF EXISTS names_saved")

    # One run per saveAsTable, named as the official integration names the CREATE TABLE AS
    # SELECT that Spark 4's SaveAsV1TableCommand runs (its run carrying the table), and the
    # table marked CREATE both times, as there: the overwrite creates the table anew.
    name = "lineage_tests.execute_create_data_source_table_as_select_command.default_names_saved"
    events = [e for e in lineage_receiver.jobs_reading(source) if "names_saved" in e["job"]["name"]]
    assert {e["job"]["name"] for e in events} == {name}
    runs: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        runs.setdefault(event["run"]["runId"], []).append(event)
    assert [event_types(run) for run in runs.values()] == [["START", "RUNNING", "COMPLETE"]] * 2
    for run in runs.values():
        (output,) = run[-1]["outputs"]
        assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"
