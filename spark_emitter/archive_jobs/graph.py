"""The lineage graph of the archive: runs, dataset edges, column edges, merged facets.

Writes four Parquet tables under ``--out`` (replacing earlier output, as the graph is
recomputed from the whole archive):

- ``runs``: one row per run — job, state (the latest event's type), start and end time,
  duration in seconds, parent run and job, number of events;
- ``dataset_edges``: per run, each dataset read (``input``) or written (``output``);
- ``column_edges``: per run and output dataset, each output field's input fields with the
  transformation type and subtype (``output_field`` is null for dataset-level inputs,
  e.g. a join key or filter column);
- ``facets``: each run's merged view of its run and job facets — per facet name, the
  version from the latest event that carried it, as OpenLineage consumers merge them.

"Latest" is by ``eventTime``; at the same instant a terminal event (COMPLETE, FAIL,
ABORT) counts as later than START or RUNNING. Identical lines archived twice count once.

    lineage-proxy spark graph --archive /data/archive --out /data/graph
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_emitter.archive_jobs.archive_source import read_archive_lines
from spark_emitter.archive_jobs.session import run_job_main

__all__ = ["GraphResult", "build_graph", "main", "run"]

log = logging.getLogger("lineage_proxy.spark.graph")

_TRANSFORMATIONS = "ARRAY<STRUCT<type: STRING, subtype: STRING>>"
_INPUT_FIELDS = (
    f"ARRAY<STRUCT<namespace: STRING, name: STRING, field: STRING, "
    f"transformations: {_TRANSFORMATIONS}>>"
)
_COLUMN_LINEAGE = (
    f"STRUCT<fields: MAP<STRING, STRUCT<inputFields: {_INPUT_FIELDS}>>, dataset: {_INPUT_FIELDS}>"
)
# Facets are read as JSON text (MAP<STRING, STRING> keeps each facet's JSON as it was).
_EVENT_FIELDS = (
    "eventType STRING, eventTime STRING, "
    "run STRUCT<runId: STRING, facets: MAP<STRING, STRING>>, "
    "job STRUCT<namespace: STRING, name: STRING, facets: MAP<STRING, STRING>>, "
    "inputs ARRAY<STRUCT<namespace: STRING, name: STRING>>, "
    "outputs ARRAY<STRUCT<namespace: STRING, name: STRING, "
    f"facets: STRUCT<columnLineage: {_COLUMN_LINEAGE}>>>"
)
TABLES = ("runs", "dataset_edges", "column_edges", "facets")


@dataclass
class GraphResult:
    counts: dict[str, int] = field(default_factory=dict)  # rows per table
    states: dict[str, int] = field(default_factory=dict)  # runs per state
    jobs: int = 0


def _run_events(spark: Any, archive: str) -> Any:
    from pyspark.sql import functions as F

    lines = read_archive_lines(spark, archive)
    if lines is None:
        return None
    parsed = lines.dropDuplicates(["value"]).select(F.from_json("value", _EVENT_FIELDS).alias("e"))
    return parsed.filter(F.col("e.run.runId").isNotNull()).select(
        F.col("e.run.runId").alias("run_id"),
        F.col("e.eventType").alias("event_type"),
        F.expr("try_cast(e.eventTime AS TIMESTAMP)").alias("event_time"),
        # Orders events of one instant: terminal states come after START/RUNNING.
        F.expr(
            "CASE e.eventType WHEN 'COMPLETE' THEN 2 WHEN 'FAIL' THEN 2 WHEN 'ABORT' THEN 2 "
            "WHEN 'START' THEN 0 ELSE 1 END"
        ).alias("rank"),
        F.col("e.job.namespace").alias("job_namespace"),
        F.col("e.job.name").alias("job_name"),
        F.col("e.run.facets").alias("run_facets"),
        F.col("e.job.facets").alias("job_facets"),
        F.col("e.inputs").alias("inputs"),
        F.col("e.outputs").alias("outputs"),
    )


def _runs(events: Any) -> Any:
    from pyspark.sql import functions as F

    order = F.struct("event_time", "rank")
    parent = F.col("run_facets").getItem("parent")
    return (
        events.withColumn("order", order)
        .groupBy("run_id")
        .agg(
            F.expr("max_by(job_namespace, order)").alias("job_namespace"),
            F.expr("max_by(job_name, order)").alias("job_name"),
            F.expr("max_by(event_type, order)").alias("state"),
            F.coalesce(
                F.min(F.when(F.col("event_type") == "START", F.col("event_time"))),
                F.min("event_time"),
            ).alias("start_time"),
            F.max(F.when(F.col("rank") == 2, F.col("event_time"))).alias("end_time"),
            F.max(F.get_json_object(parent, "$.run.runId")).alias("parent_run_id"),
            F.max(F.get_json_object(parent, "$.job.namespace")).alias("parent_job_namespace"),
            F.max(F.get_json_object(parent, "$.job.name")).alias("parent_job_name"),
            F.count(F.lit(1)).alias("events"),
        )
        .withColumn(
            "duration_seconds",
            F.col("end_time").cast("double") - F.col("start_time").cast("double"),
        )
    )


def _dataset_edges(events: Any) -> Any:
    from pyspark.sql import functions as F

    sides = []
    for direction, column in (("input", "inputs"), ("output", "outputs")):
        sides.append(
            events.select(
                "run_id",
                "job_namespace",
                "job_name",
                F.lit(direction).alias("direction"),
                F.explode(column).alias("d"),
            ).select(
                "run_id",
                "job_namespace",
                "job_name",
                "direction",
                F.col("d.namespace").alias("dataset_namespace"),
                F.col("d.name").alias("dataset_name"),
            )
        )
    return sides[0].unionByName(sides[1]).distinct()


def _column_edges(events: Any) -> Any:
    from pyspark.sql import functions as F

    outputs = events.select(
        "run_id", "job_namespace", "job_name", F.explode("outputs").alias("o")
    ).select(
        "run_id",
        "job_namespace",
        "job_name",
        F.col("o.namespace").alias("output_namespace"),
        F.col("o.name").alias("output_name"),
        F.col("o.facets.columnLineage").alias("lineage"),
    )
    keys = ["run_id", "job_namespace", "job_name", "output_namespace", "output_name"]
    per_field = outputs.select(*keys, F.explode("lineage.fields").alias("output_field", "f"))
    per_field = per_field.select(*keys, "output_field", F.explode("f.inputFields").alias("i"))
    whole = outputs.select(
        *keys,
        F.lit(None).cast("string").alias("output_field"),
        F.explode("lineage.dataset").alias("i"),
    )
    edges = per_field.unionByName(whole).select(
        *keys,
        "output_field",
        F.col("i.namespace").alias("input_namespace"),
        F.col("i.name").alias("input_name"),
        F.col("i.field").alias("input_field"),
        F.explode_outer("i.transformations").alias("t"),
    )
    return edges.select(
        *keys,
        "output_field",
        "input_namespace",
        "input_name",
        "input_field",
        F.col("t.type").alias("transformation_type"),
        F.col("t.subtype").alias("transformation_subtype"),
    ).distinct()


def _merged_facets(events: Any) -> Any:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    scoped = []
    for scope, column in (("run", "run_facets"), ("job", "job_facets")):
        scoped.append(
            events.select(
                "run_id",
                "event_time",
                "rank",
                F.lit(scope).alias("scope"),
                F.explode(column).alias("facet_name", "facet"),
            )
        )
    facets = scoped[0].unionByName(scoped[1])
    latest = Window.partitionBy("run_id", "scope", "facet_name").orderBy(
        F.col("event_time").desc_nulls_last(), F.col("rank").desc()
    )
    return (
        facets.withColumn("n", F.row_number().over(latest))
        .filter(F.col("n") == 1)
        .select(
            "run_id", "scope", "facet_name", "facet", F.col("event_time").alias("from_event_time")
        )
    )


def build_graph(spark: Any, archive: str, out: str) -> GraphResult:
    """Compute the four tables from ``archive`` and write them under ``out``."""
    events = _run_events(spark, archive)
    result = GraphResult()
    if events is None:
        log.info("no finished archive files under %s", archive)
        return result
    events.persist()
    try:
        tables = {
            "runs": _runs(events),
            "dataset_edges": _dataset_edges(events),
            "column_edges": _column_edges(events),
            "facets": _merged_facets(events),
        }
        for name in TABLES:
            log.info("writing %s", name)
            target = f"{out.rstrip('/')}/{name}"
            tables[name].write.mode("overwrite").parquet(target)
            written = spark.read.parquet(target)
            result.counts[name] = written.count()
            if name == "runs":
                result.states = {
                    r.state: r["count"] for r in written.groupBy("state").count().collect()
                }
                result.jobs = written.select("job_namespace", "job_name").distinct().count()
    finally:
        events.unpersist()
    return result


def run(spark: Any, args: argparse.Namespace) -> int:
    """Run on ``spark`` with parsed ``--archive``/``--out``; prints the summary."""
    result = build_graph(spark, args.archive, args.out)
    states = ", ".join(f"{n} {s}" for s, n in sorted(result.states.items())) or "none"
    print(f"lineage graph of {args.archive} → {args.out}")
    print(f"  runs: {result.counts.get('runs', 0)} ({states}) of {result.jobs} job(s)")
    print(f"  dataset edges: {result.counts.get('dataset_edges', 0)}")
    print(f"  column edges: {result.counts.get('column_edges', 0)}")
    print(f"  merged facets: {result.counts.get('facets', 0)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_job_main(__doc__.split("\n", 1)[0], "lineage-proxy graph", run, argv)


if __name__ == "__main__":
    sys.exit(main())
