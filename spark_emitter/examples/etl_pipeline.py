"""A realistic multi-step PySpark ETL, instrumented with ``enable_lineage`` — the demo.

It generates raw inputs into a work directory (orders as two regional CSV files, customers
as JSON Lines, with the usual dirt: cancelled orders, blank amounts, duplicate customers,
a negative amount), then runs six steps, each one Spark action and so one lineage job:

1. ``clean_orders``: read both CSVs, union, filter, cast, normalise → ``staging/orders`` (Parquet)
2. ``clean_customers``: read JSON, de-duplicate, normalise → ``staging/customers`` (Parquet)
3. ``daily_revenue``: join orders with customers, aggregate per country and day →
   ``marts/daily_revenue`` (Parquet partitioned by ``order_date``)
4. ``customer_rank``: rank customers by spend within their country (window) → catalog
   table ``customer_rank``
5. ``refund_check``: fails on purpose — it refuses to write refunds while a negative
   amount is present, so the run shows a FAIL with its error
6. ``cleanup``: drops a scratch table (a DROP lifecycle change)

Run it (the emitter reads ``OPENLINEAGE_URL`` / ``OPENLINEAGE_NAMESPACE``)::

    OPENLINEAGE_URL=http://127.0.0.1:5000 OPENLINEAGE_NAMESPACE=demo \\
        python -m spark_emitter.examples.etl_pipeline --workdir /tmp/etl-demo
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["PipelineResult", "generate_inputs", "main", "run_pipeline"]

log = logging.getLogger("etl_pipeline")

_ORDERS_HEADER = "order_id,customer_id,amount,currency,order_ts,status"
_ORDERS = {
    "eu": [
        "1,c1,120.50,eur,2026-11-20T09:15:00,paid",
        "2,c2,80.00,EUR,2026-11-20T11:02:00,paid",
        "3,c1,,eur,2026-11-20T12:00:00,paid",
        "4,c3,42.10, eur ,2026-11-21T08:30:00,cancelled",
        "5,c3,310.00,eur,2026-11-21T17:45:00,paid",
        "6,c2,-15.00,eur,2026-11-21T18:00:00,refund",
    ],
    "us": [
        "101,c4,99.99,usd,2026-11-20T15:00:00,paid",
        "102,c5,15.25,USD,2026-11-21T10:10:00,paid",
        "103,c4,250.00,usd,2026-11-21T22:05:00,paid",
    ],
}
_CUSTOMERS = [
    {"customer_id": "c1", "name": "Ann", "country": "no", "segment": "retail"},
    {"customer_id": "c2", "name": "Bo", "country": "SE", "segment": "retail"},
    {"customer_id": "c2", "name": "Bo", "country": "SE", "segment": "retail"},
    {"customer_id": "c3", "name": "Cai", "country": "dk", "segment": "business"},
    {"customer_id": "c4", "name": "Dee", "country": "us", "segment": "business"},
    {"customer_id": "c5", "name": "Eli", "country": "US", "segment": "retail"},
]


@dataclass
class PipelineResult:
    """Where each step wrote, and which steps failed (name → error)."""

    workdir: Path
    outputs: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


def generate_inputs(raw: Path) -> dict[str, Path]:
    """Write the raw files the pipeline reads; returns their paths by role."""
    raw.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for region, rows in _ORDERS.items():
        path = raw / f"orders_{region}.csv"
        path.write_text("\n".join([_ORDERS_HEADER, *rows]) + "\n")
        paths[f"orders_{region}"] = path
    customers = raw / "customers.jsonl"
    customers.write_text("".join(json.dumps(c) + "\n" for c in _CUSTOMERS))
    paths["customers"] = customers
    return paths


def run_pipeline(spark: Any, workdir: Path) -> PipelineResult:
    """Run the six steps on ``spark``; a failing step is recorded, not raised."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    raw = generate_inputs(workdir / "raw")
    staging, marts = workdir / "staging", workdir / "marts"
    result = PipelineResult(workdir)
    order_schema = (
        "order_id INT, customer_id STRING, amount DOUBLE, currency STRING, "
        "order_ts TIMESTAMP, status STRING"
    )

    # 1. clean_orders: union of the regional files, projection and filter.
    regional = [
        spark.read.option("header", True).schema(order_schema).csv(str(raw[f"orders_{r}"]))
        for r in ("eu", "us")
    ]
    orders = (
        regional[0]
        .unionByName(regional[1])
        .filter((F.col("status") != "cancelled") & F.col("amount").isNotNull())
        .select(
            "order_id",
            "customer_id",
            F.round("amount", 2).alias("amount"),
            F.upper(F.trim("currency")).alias("currency"),
            F.to_date("order_ts").alias("order_date"),
            "status",
        )
    )
    result.outputs["orders"] = str(staging / "orders")
    orders.write.mode("overwrite").parquet(result.outputs["orders"])

    # 2. clean_customers: de-duplicate and normalise.
    customers = (
        spark.read.json(str(raw["customers"]))
        .dropDuplicates(["customer_id"])
        .select("customer_id", "name", F.upper("country").alias("country"), "segment")
    )
    result.outputs["customers"] = str(staging / "customers")
    customers.write.mode("overwrite").parquet(result.outputs["customers"])

    # 3. daily_revenue: join and aggregate, partitioned output.
    clean_orders = spark.read.parquet(result.outputs["orders"])
    clean_customers = spark.read.parquet(result.outputs["customers"])
    paid = clean_orders.filter(F.col("status") == "paid").join(clean_customers, "customer_id")
    daily = paid.groupBy("country", "order_date").agg(
        F.sum("amount").alias("revenue"),
        F.count("order_id").alias("orders"),
        F.countDistinct("customer_id").alias("customers"),
    )
    result.outputs["daily_revenue"] = str(marts / "daily_revenue")
    daily.write.mode("overwrite").partitionBy("order_date").parquet(result.outputs["daily_revenue"])

    # 4. customer_rank: spend per customer, ranked within the country (window) → table.
    spend = paid.groupBy("country", "customer_id", "name").agg(F.sum("amount").alias("spend"))
    by_country = Window.partitionBy("country").orderBy(F.desc("spend"))
    ranked = spend.withColumn("rank", F.rank().over(by_country))
    ranked.write.mode("overwrite").saveAsTable("customer_rank")
    result.outputs["customer_rank"] = "customer_rank"

    # 5. refund_check: refuses to publish refunds while negative amounts exist — fails.
    checked = clean_orders.select(
        "order_id",
        F.when(F.col("amount") < 0, F.raise_error(F.lit("negative amount: refunds not booked")))
        .otherwise(F.col("amount"))
        .alias("amount"),
    )
    try:
        checked.write.mode("overwrite").parquet(str(marts / "refunds"))
    except Exception as exc:  # the failure is the point of this step
        result.failed["refund_check"] = str(exc).splitlines()[0]
        log.warning("refund_check failed as intended: %s", result.failed["refund_check"])

    # 6. cleanup: a scratch table created and dropped.
    spark.sql("CREATE TABLE IF NOT EXISTS scratch_orders USING parquet AS SELECT 1 AS id")
    spark.sql("DROP TABLE scratch_orders")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--workdir", type=Path, required=True, help="where inputs and outputs go")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--app-name", default="Sales ETL", help="Spark application name")
    args = parser.parse_args(argv)
    # py4j logs every callback at INFO; only this pipeline's own progress is wanted.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    log.setLevel(logging.INFO)

    from pyspark.sql import SparkSession

    from spark_emitter import enable_lineage

    spark = (
        SparkSession.builder.master(args.master)
        .appName(args.app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.warehouse.dir", str(args.workdir / "warehouse"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("FATAL")
    emitter = enable_lineage(spark)
    if emitter is None:
        log.warning("OPENLINEAGE_URL not set: running without lineage")
    try:
        result = run_pipeline(spark, args.workdir)
    finally:
        spark.stop()
    summary: dict[str, Any] = {"outputs": result.outputs, "failed_steps": result.failed}
    if emitter is not None:
        summary["lineage"] = {
            "application_run_id": emitter.app_run_id,
            "sent": emitter.stats.sent,
            "failed": emitter.stats.failed,
            "dropped": emitter.stats.dropped,
        }
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
