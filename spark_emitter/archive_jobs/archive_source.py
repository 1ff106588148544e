"""Reading the archive with Spark: the raw lines, with their partition columns.

The layout is written by :mod:`proxy.destinations.archive.destination`: ``dt=YYYY-MM-DD/
namespace=<escaped>/`` directories of JSON Lines files, plain or gzip; files whose names
start with ``_`` or ``.`` are still being written, and Spark's file listing skips those by
default. Partition values are read as strings (a namespace may look like a number).
"""

from __future__ import annotations

from typing import Any

from spark_emitter.archive_jobs.session import prepare_session

__all__ = ["path_exists", "read_archive_lines"]


def path_exists(spark: Any, path: str) -> bool:
    """Whether ``path`` exists, asked of the path's own Hadoop file system (s3a, hdfs, file)."""
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return bool(fs.exists(hadoop_path))


def read_archive_lines(spark: Any, archive: str) -> Any:
    """DataFrame ``value`` (the event's JSON line), ``dt``, ``namespace``; blank lines dropped.

    None when the archive holds no finished file yet.
    """
    from pyspark.sql import functions as F

    if not path_exists(spark, archive):
        return None
    prepare_session(spark)
    try:
        lines = spark.read.text(archive)
    except Exception as exc:  # Spark cannot list an archive with no finished files
        if "Unable to infer schema" in str(exc) or "PATH_NOT_FOUND" in str(exc):
            return None
        raise
    if "dt" not in lines.columns or "namespace" not in lines.columns:
        if lines.limit(1).count() == 0:
            return None  # only files still being written (or none at all)
        raise ValueError(f"{archive}: not an archive (no dt=/namespace= partition directories)")
    return lines.filter(F.length(F.trim("value")) > 0)
