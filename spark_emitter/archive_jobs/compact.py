"""Compaction: the JSON Lines archive → Parquet partitioned by ``dt`` and ``namespace``.

Each event becomes one row: ``event_id`` (SHA-256 of its JSON line), ``event_type``,
``event_time`` (timestamp), ``run_id``, ``job_namespace``, ``job_name`` and ``event`` (the
original JSON, untouched), under the same ``dt=…/namespace=…`` partitions as the archive.
Idempotent: rows whose ``event_id`` is already in the output are not written again, so
re-running after new files arrived appends only those (and identical lines the proxy
archived twice, e.g. after a client retry, are kept once).

    lineage-proxy spark compact --archive /data/archive --out /data/compacted
    spark-submit --py-files lineage_proxy.whl compact.py --archive s3a://b/archive --out s3a://b/c
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spark_emitter.archive_jobs.archive_source import path_exists, read_archive_lines
from spark_emitter.archive_jobs.session import run_job_main

__all__ = ["CompactionResult", "compact", "main", "run"]

log = logging.getLogger("lineage_proxy.spark.compact")

# Only the fields compaction lifts into columns; the event itself is kept as text.
_EVENT_FIELDS = (
    "eventType STRING, eventTime STRING, run STRUCT<runId: STRING>, "
    "job STRUCT<namespace: STRING, name: STRING>"
)


@dataclass(frozen=True)
class CompactionResult:
    read: int  # distinct events in the archive
    added: int  # rows appended this time
    partitions: int  # (dt, namespace) partitions touched


def compact(spark: Any, archive: str, out: str) -> CompactionResult:
    from pyspark.sql import functions as F

    lines = read_archive_lines(spark, archive)
    if lines is None:
        log.info("no finished archive files under %s", archive)
        return CompactionResult(0, 0, 0)
    parsed = lines.select(
        F.sha2(F.col("value"), 256).alias("event_id"),
        F.from_json("value", _EVENT_FIELDS).alias("e"),
        F.col("value").alias("event"),
        "dt",
        "namespace",
    )
    # Every event has an eventTime; a line without one is not an event (e.g. the torn
    # last line of a file a crashed writer left behind) and is not compacted.
    rows = (
        parsed.filter(F.col("e.eventTime").isNotNull())
        .select(
            "event_id",
            F.col("e.eventType").alias("event_type"),
            F.expr("try_cast(e.eventTime AS TIMESTAMP)").alias("event_time"),
            F.col("e.run.runId").alias("run_id"),
            F.col("e.job.namespace").alias("job_namespace"),
            F.col("e.job.name").alias("job_name"),
            "event",
            "dt",
            "namespace",
        )
        .dropDuplicates(["event_id"])
    )
    rows.persist()
    try:
        read = rows.count()
        dates = sorted(r.dt for r in rows.select("dt").distinct().collect())
        new = rows
        if path_exists(spark, out):
            # Only the dates being compacted can hold these events: prune the rest.
            existing = spark.read.parquet(out).filter(F.col("dt").isin(dates)).select("event_id")
            new = rows.join(existing, "event_id", "left_anti")
        new.persist()
        added = new.count()
        partitions = new.select("dt", "namespace").distinct().count()
        if added:
            log.info("appending %d new event(s) in %d partition(s) to %s", added, partitions, out)
            new.write.mode("append").partitionBy("dt", "namespace").parquet(out)
        new.unpersist()
    finally:
        rows.unpersist()
    return CompactionResult(read, added, partitions)


def run(spark: Any, args: argparse.Namespace) -> int:
    """Run on ``spark`` with parsed ``--archive``/``--out``; prints the summary."""
    result = compact(spark, args.archive, args.out)
    print(
        f"compacted {args.archive} → {args.out}: {result.read} event(s) read, "
        f"{result.added} added in {result.partitions} partition(s), "
        f"{result.read - result.added} already there"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_job_main(__doc__.split("\n", 1)[0], "lineage-proxy compact", run, argv)


if __name__ == "__main__":
    sys.exit(main())
