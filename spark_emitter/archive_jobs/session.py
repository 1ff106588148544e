"""The SparkSession and command line every archive job shares.

No master is set unless asked for: under ``spark-submit`` the cluster's comes from the
command line, and plain ``python`` gets Spark's local default.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "add_job_arguments",
    "job_session",
    "prepare_session",
    "run_job",
    "run_job_main",
    "s3a_settings",
]

# The Hadoop release of PySpark's own client jars (PySpark 4.x); hadoop-aws must match it.
_HADOOP_AWS_VERSION = "3.5.0"

Job = Callable[[Any, argparse.Namespace], int]

log = logging.getLogger("lineage_proxy.spark")


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--archive", required=True, help="archive root (local path, s3a://…, hdfs://…)"
    )
    parser.add_argument("--out", required=True, help="output root (local path, s3a://…, hdfs://…)")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local)")


def _hadoop_aws_jars(environ: Mapping[str, str]) -> list[str]:
    """hadoop-aws and its runtime dependencies (the AWS SDK bundle, the analytics
    accelerator) from the cache ``scripts/s3.sh`` fills, if it is complete."""
    cache = Path(environ.get("LINEAGE_PROXY_CACHE") or Path.home() / ".cache" / "lineage-proxy")
    libs = cache / f"hadoop-aws-{_HADOOP_AWS_VERSION}" / "libs"
    if not (libs / ".complete").exists():
        return []
    return [str(jar) for jar in sorted(libs.glob("*.jar"))]


def s3a_settings(paths: Sequence[str], environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Session settings for ``s3a://`` paths among ``paths`` (none if there are none).

    The connector: hadoop-aws and its dependencies from the local cache (``scripts/s3.sh
    hadoop-aws-jars``), else ``spark.jars.packages`` resolves them from Maven Central. The
    store: ``AWS_ENDPOINT_URL`` (then path-style URLs, as self-hosted stores want),
    ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` — the variables boto3
    and the AWS CLI read; without keys, S3A's own credential chain applies."""
    if not any(path.startswith("s3a://") for path in paths):
        return {}
    jars = _hadoop_aws_jars(environ)
    settings = (
        {"spark.jars": ",".join(jars)}
        if jars
        else {"spark.jars.packages": f"org.apache.hadoop:hadoop-aws:{_HADOOP_AWS_VERSION}"}
    )
    hadoop = "spark.hadoop.fs.s3a."
    endpoint = environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        settings[f"{hadoop}endpoint"] = endpoint
        settings[f"{hadoop}path.style.access"] = environ.get("LINEAGE_S3A_PATH_STYLE", "true")
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
    if region:
        settings[f"{hadoop}endpoint.region"] = region
    if environ.get("AWS_ACCESS_KEY_ID") and environ.get("AWS_SECRET_ACCESS_KEY"):
        settings[f"{hadoop}access.key"] = environ["AWS_ACCESS_KEY_ID"]
        settings[f"{hadoop}secret.key"] = environ["AWS_SECRET_ACCESS_KEY"]
    return settings


def job_session(
    app_name: str, master: str | None, settings: Mapping[str, str] | None = None
) -> tuple[Any, bool]:
    """The session to run on, and whether this call created it (and so should stop it).
    ``settings`` apply to a session made here (an active one keeps its own)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for key, value in (settings or {}).items():
        builder = builder.config(key, value)
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
    paths = [str(getattr(args, name, "") or "") for name in ("archive", "out")]
    spark, created = job_session(app_name, args.master, s3a_settings(paths))
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
