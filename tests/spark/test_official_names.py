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
from tests.spark.conftest import LineageReceiver, settle

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
    assert [e["eventType"] for e in insert] == ["START", "COMPLETE"]
    # A partition directory written directly: named by the dataset's directory.
    partition_write = _runs_named(lineage_receiver, f"{INSERT}.{tmp_path.name}_events")
    assert [e["eventType"] for e in partition_write] == ["START", "COMPLETE"]
