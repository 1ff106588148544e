"""Our events for the official Spark integration's container-test scenarios, field by field.

Each test runs the statements of one official scenario script
(``integration/spark/app/src/test/resources/spark_scripts/*.py`` in the OpenLineage
repository) and checks our events against that scenario's expected event
(``integration/spark/app/integrations/container/*.json``): job name, dataset namespaces and
names, the facets present and their fields, column lineage. The expected values are
written here as facts, with paths and table names mapped onto this session's warehouse.

Known, deliberate difference: the official ``dataSource`` facet has ``uri: "file"``, which is
not a URI (the spec's ``format: uri`` refuses it); ours is ``file:///``.

The Hive-only scenarios (CTAS ``USING hive``, column lineage, LOAD DATA, INSERT OVERWRITE
DIRECTORY) are in ``test_official_hive_conformance.py``; multi-path reads and partitioned
writes in ``test_official_names.py``; a failing listener in ``test_emitter.py``
(``spark_test_failures.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_emitter import LineageEmitter
from tests.spark.conftest import (
    LineageReceiver,
    column_edges,
    completed,
    schema_fields,
    settle,
    table_symlink,
)

pytestmark = pytest.mark.spark

APP = "lineage_tests"


def _warehouse(spark: SparkSession) -> Path:
    return Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))


def _data_source_is_file(dataset: dict[str, Any]) -> None:
    assert dataset["namespace"] == "file"
    assert dataset["facets"]["dataSource"]["name"] == "file"
    assert dataset["facets"]["dataSource"]["uri"].startswith("file:")


def test_insert_into_a_parquet_table_matches_the_official_hadoop_fs_relation_event(
    spark: SparkSession, emitter: LineageEmitter, lineage_receiver: LineageReceiver
) -> None:
    # spark_hadoop_fs_relation.py, tables test and target renamed to be unique here.
    spark.sql("CREATE TABLE conf_hfs_test (key INT, value STRING) USING parquet")
    spark.sql("CREATE TABLE conf_hfs_target (key INT, value STRING) USING parquet")
    # The script compares a string with a number, which Spark 4's ANSI mode refuses.
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        spark.sql("INSERT INTO conf_hfs_test VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        spark.sql("INSERT INTO conf_hfs_target SELECT * from conf_hfs_test WHERE value > 1")
        settle(emitter)
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
        spark.sql("DROP TABLE conf_hfs_test")
        spark.sql("DROP TABLE conf_hfs_target")
    warehouse = _warehouse(spark)

    # pysparkHadoopFSEndEvent.json: job
    # "open_lineage_integration_hadoop_fs_relation.execute_insert_into_hadoop_fs_relation_command
    # .warehouse_target" (the last two parts of the table's location /tmp/warehouse/target).
    event = completed(
        lineage_receiver.events,
        f"{APP}.execute_insert_into_hadoop_fs_relation_command.{warehouse.name}_conf_hfs_target",
    )
    # One input, the source table by location: file + /tmp/warehouse/test, schema
    # key integer, value string.
    (source,) = event["inputs"]
    assert source["name"] == str(warehouse / "conf_hfs_test")
    _data_source_is_file(source)
    assert schema_fields(source) == [("key", "integer"), ("value", "string")]
    # One output by location, same schema, symlink file:/tmp/warehouse + default.target TABLE.
    (target,) = event["outputs"]
    assert target["name"] == str(warehouse / "conf_hfs_target")
    _data_source_is_file(target)
    assert schema_fields(target) == [("key", "integer"), ("value", "string")]
    assert table_symlink(target) == (f"file:{warehouse}", "default.conf_hfs_target", "TABLE")
    # Column lineage: the expected event lists the WHERE in every field, the shape of
    # datasetLineageEnabled=false; with the jar's 1.53 default (true), which is ours, the
    # WHERE is listed once, in the facet's dataset-level list.
    for field in ("key", "value"):
        assert column_edges(target, field) == {("conf_hfs_test", field, "DIRECT/IDENTITY")}
    assert column_edges(target, None) == {("conf_hfs_test", "value", "INDIRECT/FILTER")}


def test_create_truncate_rename_and_drop_match_the_official_lifecycle_events(
    spark: SparkSession, emitter: LineageEmitter, lineage_receiver: LineageReceiver
) -> None:
    # spark_create_table.py, spark_truncate_table.py, spark_alter_table.py and
    # spark_drop_table.py (Spark 4 makes these data source tables, Hive support or not).
    # Each statement settles before the next: Spark's listener bus runs behind the session,
    # and a table's description is read from the catalog when the listener gets to it, so
    # without the wait the rename could be read after the DROP took the table away (the
    # official integration reads the catalog the same way).
    for statement in (
        "CREATE TABLE conf_created (a string, b string) USING parquet",
        "TRUNCATE TABLE conf_created",
        "ALTER TABLE conf_created RENAME TO conf_renamed",
        "DROP TABLE conf_renamed",
    ):
        spark.sql(statement)
        settle(emitter)
    warehouse = _warehouse(spark)
    created, renamed = str(warehouse / "conf_created"), str(warehouse / "conf_renamed")

    # pysparkCreateTableCompleteEvent.json: "...execute_create_table_command
    # .create_test_create_table_test" — the location's last two parts; output by location,
    # schema a, b string, lifecycle CREATE, symlink default.create_table_test.
    event = completed(
        lineage_receiver.events,
        f"{APP}.execute_create_data_source_table_command.{warehouse.name}_conf_created",
    )
    assert event["inputs"] == []
    (output,) = event["outputs"]
    assert output["name"] == created
    _data_source_is_file(output)
    assert schema_fields(output) == [("a", "string"), ("b", "string")]
    assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"
    assert table_symlink(output)[1:] == ("default.conf_created", "TABLE")

    # pysparkTruncateTableCompleteEvent.json: "...execute_truncate_table_command
    # .truncate_test_truncate_table_test"; no inputs; output by location with dataSource,
    # symlink default.truncate_table_test and lifecycle TRUNCATE.
    event = completed(
        lineage_receiver.events,
        f"{APP}.execute_truncate_table_command.{warehouse.name}_conf_created",
    )
    assert event["inputs"] == []
    (output,) = event["outputs"]
    assert output["name"] == created
    _data_source_is_file(output)
    assert table_symlink(output)[1:] == ("default.conf_created", "TABLE")
    assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "TRUNCATE"

    # pysparkAlterTableRenameEnd.json: the output is the table after the rename (by its new
    # location, its schema, symlink default.alter_table_test_new), lifecycle RENAME with
    # previousIdentifier {namespace file, name: the old location}.
    event = completed(
        lineage_receiver.events, f"{APP}.execute_alter_table_rename_command.default_conf_renamed"
    )
    assert event["inputs"] == []
    (output,) = event["outputs"]
    _data_source_is_file(output)
    assert schema_fields(output) == [("a", "string"), ("b", "string")]
    lifecycle = output["facets"]["lifecycleStateChange"]
    assert (lifecycle["lifecycleStateChange"], lifecycle["previousIdentifier"]) == (
        "RENAME",
        {"namespace": "file", "name": created},
    )
    assert table_symlink(output) == (f"file:{warehouse}", "default.conf_renamed", "TABLE")

    # pysparkDropTableStartEvent.json: output by location (/tmp/drop_test/drop_table_test),
    # symlink default.drop_table_test, lifecycle DROP; pysparkDropTableCompleteEvent.json
    # names the job after the location ("...drop_test_drop_table_test").
    drops = [e for e in lineage_receiver.jobs_writing(renamed) if "drop_table" in e["job"]["name"]]
    assert [e["eventType"] for e in drops] == ["START", "COMPLETE"]
    assert {e["job"]["name"] for e in drops} == {f"{APP}.drop_table.{warehouse.name}_conf_renamed"}
    for event in drops:
        (output,) = event["outputs"]
        _data_source_is_file(output)
        assert table_symlink(output)[1:] == ("default.conf_renamed", "TABLE")
        assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "DROP"
