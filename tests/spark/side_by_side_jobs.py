"""The conformance jobs, run once in one Spark session that carries both the official
OpenLineage Spark integration (the jar, as ``spark.extraListeners``) and our emitter, so
both see exactly the same executions and one JVM start serves both.

``python -m tests.spark.side_by_side_jobs WORKDIR OURS_URL`` (from the repository root),
with the jar's settings in ``SIDE_BY_SIDE_CONF`` (a JSON object of Spark conf keys: the
official transport, ``spark.jars``, ``spark.extraListeners``). Our emitter posts to
OURS_URL. Prints one JSON object: each job's time window (which runs belong to which job)
and our emitter's delivery counters. ``test_official_jar.py`` starts it.

The session is Hive-enabled (LOAD DATA and ``USING hive`` need it), its Derby metastore and
warehouse under WORKDIR. Between jobs Spark's listener bus is drained — the official
listener sends from the bus thread, so its events of a job are out when the bus is empty —
and our send queue flushed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from spark_emitter import enable_lineage

APP_NAME = "side_by_side"
NAMESPACE = "side-by-side"


def _write_inputs(workdir: Path) -> None:
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "orders_a.csv").write_text("order_id,customer_id,amount,status\n1,10,5.0,paid\n")
    (data / "orders_b.csv").write_text("order_id,customer_id,amount,status\n2,11,7.5,open\n")
    (data / "customers.csv").write_text("customer_id,country\n10,FR\n11,DE\n")
    # LOAD DATA copies the file as it is into the table's folder: Hive's default text format.
    (data / "load.txt").write_text("1\x01one\n2\x01two\n")


def _csv(spark: SparkSession, *paths: Path) -> Any:
    return (
        spark.read.option("header", "true")
        .option("inferSchema", "true")
        .csv([str(p) for p in paths])
    )


def hadoop_fs(spark: SparkSession, work: Path) -> None:
    _csv(spark, work / "data" / "customers.csv").write.mode("overwrite").parquet(
        str(work / "out" / "customers")
    )


def multi_path_read(spark: SparkSession, work: Path) -> None:
    orders = _csv(spark, work / "data" / "orders_a.csv", work / "data" / "orders_b.csv")
    orders.write.mode("overwrite").parquet(str(work / "out" / "orders"))


def join_aggregate(spark: SparkSession, work: Path) -> None:
    orders = spark.read.parquet(str(work / "out" / "orders"))
    customers = spark.read.parquet(str(work / "out" / "customers"))
    revenue = (
        orders.filter("status = 'paid'")
        .join(customers, "customer_id")
        .groupBy("country")
        .agg({"amount": "sum"})
        .withColumnRenamed("sum(amount)", "revenue")
    )
    revenue.write.mode("overwrite").parquet(str(work / "out" / "revenue"))


def partitioned_write(spark: SparkSession, work: Path) -> None:
    customers = spark.read.parquet(str(work / "out" / "customers"))
    customers.write.mode("overwrite").partitionBy("country").parquet(
        str(work / "out" / "by_country")
    )


def failing(spark: SparkSession, work: Path) -> None:
    orders = spark.read.parquet(str(work / "out" / "orders"))
    broken = orders.selectExpr("IF(amount > 6, raise_error('negative amount'), amount) AS amount")
    try:
        broken.write.mode("overwrite").parquet(str(work / "out" / "refunds"))
    except Exception:  # the failure is the job: its FAIL event is what is compared
        return
    raise AssertionError("the failing job did not fail")


def ctas(spark: SparkSession, work: Path) -> None:
    spark.read.parquet(str(work / "out" / "customers")).createOrReplaceTempView("customers")
    spark.sql("CREATE TABLE sbs_ctas USING parquet AS SELECT customer_id, country FROM customers")


def hive_ctas(spark: SparkSession, work: Path) -> None:
    spark.sql("CREATE TABLE sbs_hive_ctas USING hive AS SELECT customer_id, country FROM customers")


def save_as_table(spark: SparkSession, work: Path) -> None:
    customers = spark.read.parquet(str(work / "out" / "customers"))
    customers.write.mode("overwrite").saveAsTable("sbs_saved")


def analysis_failure(spark: SparkSession, work: Path) -> None:
    try:
        spark.read.parquet(str(work / "data" / "missing"))
    except Exception:  # Spark refuses the read in analysis: what each side sends is compared
        return
    raise AssertionError("reading a missing path did not fail")


def load_data(spark: SparkSession, work: Path) -> None:
    spark.sql("CREATE TABLE sbs_load (a INT, b STRING) USING hive")
    spark.sql(f"LOAD DATA LOCAL INPATH '{work / 'data' / 'load.txt'}' INTO TABLE sbs_load")


def create_table(spark: SparkSession, work: Path) -> None:
    spark.sql("CREATE TABLE sbs_created (a INT, b STRING) USING parquet")


def alter_add_columns(spark: SparkSession, work: Path) -> None:
    spark.sql("ALTER TABLE sbs_created ADD COLUMNS (c INT)")


def alter_rename(spark: SparkSession, work: Path) -> None:
    spark.sql("ALTER TABLE sbs_created RENAME TO sbs_renamed")


def insert_into(spark: SparkSession, work: Path) -> None:
    spark.sql("INSERT INTO sbs_renamed VALUES (1, 'x', 2)")


def truncate_table(spark: SparkSession, work: Path) -> None:
    spark.sql("TRUNCATE TABLE sbs_renamed")


def drop_table(spark: SparkSession, work: Path) -> None:
    spark.sql("DROP TABLE sbs_renamed")


def overwrite_directory(spark: SparkSession, work: Path) -> None:
    spark.sql(
        f"INSERT OVERWRITE DIRECTORY '{work / 'out' / 'exported'}' USING parquet "
        "SELECT customer_id FROM sbs_ctas"
    )


def hive_overwrite_directory(spark: SparkSession, work: Path) -> None:
    spark.sql(
        f"INSERT OVERWRITE DIRECTORY '{work / 'out' / 'hive_exported'}' USING hive "
        "SELECT customer_id, country FROM sbs_ctas"
    )


JOBS: dict[str, Callable[[SparkSession, Path], None]] = {
    job.__name__: job
    for job in (
        hadoop_fs,
        multi_path_read,
        join_aggregate,
        partitioned_write,
        failing,
        ctas,
        hive_ctas,
        save_as_table,
        analysis_failure,
        load_data,
        create_table,
        alter_add_columns,
        alter_rename,
        insert_into,
        truncate_table,
        drop_table,
        overwrite_directory,
        hive_overwrite_directory,
    )
}


# The jobs that neither side reports: the official integration sends nothing for a query
# that fails in analysis, and our emitter does the same by default.
UNREPORTED = frozenset({"analysis_failure"})


def session(workdir: Path, conf: dict[str, str]) -> SparkSession:
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(APP_NAME)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", f"file:{workdir}/warehouse")
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={workdir}")
        .config(
            "spark.hadoop.javax.jdo.option.ConnectionURL",
            f"jdbc:derby:;databaseName={workdir}/metastore_db;create=true",
        )
        .config("spark.openlineage.namespace", NAMESPACE)
        .config("spark.openlineage.emitter.buffer.directory", f"{workdir}/buffer")
        .enableHiveSupport()
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def main(workdir: Path, ours_url: str, conf: dict[str, str]) -> dict[str, Any]:
    _write_inputs(workdir)
    spark = session(workdir, conf)
    spark.sparkContext.setLogLevel("ERROR")
    emitter = enable_lineage(spark, url=ours_url, environ={})
    assert emitter is not None
    bus = spark.sparkContext._jsc.sc().listenerBus()
    windows = []
    for name, job in JOBS.items():
        start = int(time.time() * 1000)
        job(spark, workdir)
        bus.waitUntilEmpty(60_000)
        assert emitter.flush(60), f"{name}: our events were not sent"
        windows.append({"job": name, "start_ms": start, "end_ms": int(time.time() * 1000)})
    spark.stop()
    assert emitter.close(), "our last events were not sent"
    stats = emitter.stats
    return {
        "windows": windows,
        "ours": {"sent": stats.sent, "failed": stats.failed, "dropped": stats.dropped},
    }


if __name__ == "__main__":
    summary = main(
        Path(sys.argv[1]), sys.argv[2], json.loads(os.environ.get("SIDE_BY_SIDE_CONF", "{}"))
    )
    print(json.dumps(summary))
