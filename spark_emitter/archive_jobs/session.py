"""The SparkSession and command line every archive job shares.

No master is set unless asked for: under ``spark-submit`` the cluster's comes from the
command line, and plain ``python`` gets Spark's local default.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["add_job_arguments", "job_session", "prepare_session", "run_job", "run_job_main"]

Job = Callable[[Any, argparse.Namespace], int]

log = logging.getLogger("lineage_proxy.spark")


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--archive", required=True, help="archive root (local path, s3a://…, hdfs://…)"
    )
    parser.add_argument("--out", required=True, help="output root (local path, s3a://…, hdfs://…)")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local)")


def job_session(app_name: str, master: str | None) -> tuple[Any, bool]:
    """The session to run on, and whether this call created it (and so should stop it)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    return builder.getOrCreate(), True


def prepare_session(spark: Any) -> None:
    """Settings the archive jobs rely on, set on the session they run in."""
    # Partition values are strings: a namespace may look like a number or a date.
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    # The jobs cache what they read twice; let adaptive execution still shrink the
    # shuffle partitions of cached plans, or a small archive runs hundreds of tiny tasks.
    spark.conf.set("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")


def run_job(job: Job, app_name: str, args: argparse.Namespace) -> int:
    """Run ``job`` in a session (made here unless one is active); exit code 0, 1 or 2.

    Progress goes to stderr through the ``lineage_proxy.spark`` logger for the job's
    duration only, so running it inside another program leaves that program's logging
    as it was.
    """
    if importlib.util.find_spec("pyspark") is None:
        print("the Spark jobs need PySpark: pip install 'lineage-proxy[spark]'", file=sys.stderr)
        return 2
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    spark, created = job_session(app_name, args.master)
    try:
        return job(spark, args)
    except ValueError as exc:  # the input is not what the job reads (e.g. not an archive)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if created:
            spark.stop()
        log.removeHandler(handler)


def run_job_main(description: str, app_name: str, job: Job, argv: Sequence[str] | None) -> int:
    """``python compact.py --archive … --out …`` / ``spark-submit compact.py …``."""
    parser = argparse.ArgumentParser(description=description)
    add_job_arguments(parser)
    return run_job(job, app_name, parser.parse_args(argv))
