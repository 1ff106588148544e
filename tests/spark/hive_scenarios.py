"""The official Spark integration's Hive scenarios, run with the emitter in a session of
their own: ``python -m tests.spark.hive_scenarios WORKDIR`` (from the repository root).

A JVM has one catalog kind and the shared test session's is in-memory, so the statements
that need Hive support (``USING hive``, LOAD DATA, INSERT OVERWRITE DIRECTORY in its Hive
form) run here, in a local Hive-enabled session whose Derby metastore and warehouse live in
WORKDIR. The statements are those of the OpenLineage repository's
``integration/spark/app/src/test/resources/spark_scripts/`` spark_ctas_load.py,
spark_cll.py and spark_overwrite_hive.py, with their /tmp paths moved under WORKDIR;
``test_official_hive_conformance.py`` checks the events, which the emitter writes to
WORKDIR/events.jsonl through the openlineage-python client's file transport, configured as
a user of the official integration would: ``spark.openlineage.transport.type=file``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql import SparkSession

from spark_emitter import enable_lineage

APP_NAME = "Open Lineage Hive Scenarios"


def run(workdir: Path) -> None:
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(APP_NAME)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", f"file:{workdir}/ctas_load")
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={workdir}")
        .config(
            "spark.hadoop.javax.jdo.option.ConnectionURL",
            f"jdbc:derby:;databaseName={workdir}/metastore_db;create=true",
        )
        .config("spark.openlineage.transport.type", "file")
        .config("spark.openlineage.transport.location", str(workdir / "events.jsonl"))
        .config("spark.openlineage.namespace", "hive-tests")
        # The scenarios' expected events list the INDIRECT edges in every field: the shape
        # of datasetLineageEnabled=false (the jar's default, and ours, is true).
        .config("spark.openlineage.columnLineage.datasetLineageEnabled", "false")
        .enableHiveSupport()
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    emitter = enable_lineage(spark, environ={})
    assert emitter is not None

    # spark_ctas_load.py
    frame = spark.createDataFrame([{"a": 1, "b": 2}, {"a": 3, "b": 4}])
    frame.write.option("compression", "none").saveAsTable("temp")
    spark.sql(
        f"CREATE TABLE tbl1 USING hive LOCATION '{workdir}/ctas_load/tbl1' AS SELECT a, b FROM temp"
    )
    loaded = workdir / "test_data.csv"
    loaded.write_text("5\x016\n")
    spark.sql(f"LOAD DATA LOCAL INPATH '{loaded}' INTO TABLE tbl1")

    # spark_cll.py (its output table tbl1 is cll_tbl1 here, beside the one above)
    spark.sql("CREATE TABLE cll_source1 (a int, b string)")
    spark.sql("CREATE TABLE cll_source2 (a int, c int)")
    spark.sql(
        f"""
CREATE TABLE cll_tbl1
USING hive
LOCATION '{workdir}/cll_test/tbl1'
AS SELECT
    t1.a as ident,
    CONCAT(b, 'test') as trans,
    SUM(c) as agg
FROM
    (SELECT a, c from cll_source2 where a > 1) t2
JOIN cll_source1 t1 on t1.a = t2.a
GROUP BY t1.a, b
"""
    )

    # spark_overwrite_hive.py, and the Hive form without USING
    spark.sql(
        f"INSERT OVERWRITE DIRECTORY '{workdir}/overwrite/table' USING hive "
        "VALUES (1, 'a'), (2, 'b'), (3, 'c')"
    )
    spark.sql(
        f"INSERT OVERWRITE DIRECTORY '{workdir}/overwrite/stored' STORED AS textfile "
        "SELECT a, b FROM temp"
    )
    assert emitter.flush(timeout=60)
    spark.stop()


if __name__ == "__main__":
    run(Path(sys.argv[1]))
