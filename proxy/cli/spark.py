"""``lineage-proxy spark compact|graph``: Spark jobs over the archive (the spark extra)."""

from __future__ import annotations

import argparse


def _cmd_spark(args: argparse.Namespace) -> int:
    # Imported here: the proxy itself runs without PySpark.
    from spark_emitter.archive_jobs import compact, graph
    from spark_emitter.archive_jobs.session import run_job

    job = {"compact": compact.run, "graph": graph.run}[args.spark_command]
    return run_job(job, f"lineage-proxy {args.spark_command}", args)


def add_spark_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from spark_emitter.archive_jobs.session import add_job_arguments

    spark = commands.add_parser("spark", help="Spark jobs over the archive (needs the spark extra)")
    sub = spark.add_subparsers(dest="spark_command", required=True, metavar="COMMAND")
    compact = sub.add_parser(
        "compact",
        help="archive (JSON Lines) → Parquet partitioned by dt and namespace; idempotent",
    )
    add_job_arguments(compact)
    compact.set_defaults(func=_cmd_spark)
    graph = sub.add_parser(
        "graph",
        help="runs, dataset edges, column-lineage edges and merged facets of the archive, "
        "as Parquet tables; prints a summary",
    )
    add_job_arguments(graph)
    graph.set_defaults(func=_cmd_spark)
