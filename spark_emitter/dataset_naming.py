"""Dataset namespace and name, per the OpenLineage naming conventions.

Paths: ``file`` + ``/abs/path``; ``s3://bucket`` + ``key`` (s3a/s3n are the same store);
``hdfs://host:port`` + ``/path``; other schemes ``scheme://authority`` + path. Tables in a
catalog: ``hive://host:port`` + ``db.table`` when a metastore is configured, else the
warehouse location + ``db.table`` (as a symlink of
the location-named dataset). JDBC: the database's own scheme
(``postgres://host:port`` + ``db.schema.table``, ``mysql://host:port`` + ``db.table``).
Kafka: ``kafka://host:port`` + the topic, host:port the first server of the bootstrap list
(as the official Spark and Flink integrations name it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from urllib.parse import urlsplit

__all__ = [
    "DatasetName",
    "jdbc_dataset",
    "kafka_datasets",
    "kafka_topics",
    "path_dataset",
    "table_symlink",
]

DatasetName = tuple[str, str]

# s3a and s3n are Hadoop's clients for the same S3 store; lineage names the store.
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}
_JDBC_SCHEMES = {"postgresql": "postgres", "sqlserver": "sqlserver", "mysql": "mysql"}
_JDBC_DEFAULT_SCHEMA = {"postgres": "public"}


def path_dataset(uri: str) -> DatasetName:
    """``file:/tmp/x`` → (``file``, ``/tmp/x``); ``s3a://b/k`` → (``s3://b``, ``k``)."""
    parts = urlsplit(uri)
    scheme = _SCHEME_ALIASES.get(parts.scheme, parts.scheme) or "file"
    path = parts.path or "/"
    if scheme == "file":
        return "file", path
    if scheme in ("s3", "gs", "wasbs", "abfss"):
        return f"{scheme}://{parts.netloc}", path.lstrip("/")
    return f"{scheme}://{parts.netloc}", path


def table_symlink(
    database: str | None, table: str, metastore_uri: str | None, warehouse: str
) -> DatasetName:
    """The catalog name of a table: ``hive://host:port`` + ``db.table``, or the warehouse's."""
    qualified = f"{database}.{table}" if database else table
    if metastore_uri:
        parts = urlsplit(metastore_uri.split(",")[0].strip())
        return f"hive://{parts.netloc}", qualified
    # Without a metastore the table lives in the session catalog; official clients name
    # that by the warehouse location.
    return warehouse.rstrip("/"), qualified


def jdbc_dataset(url: str, table: str) -> DatasetName:
    """``jdbc:postgresql://h:5432/db`` + ``s.t`` → (``postgres://h:5432``, ``db.s.t``)."""
    parts = urlsplit(url.removeprefix("jdbc:"))
    scheme = _JDBC_SCHEMES.get(parts.scheme, parts.scheme)
    database = parts.path.strip("/").split(";")[0]
    name = table
    if table.count(".") == 0 and scheme in _JDBC_DEFAULT_SCHEMA:
        name = f"{_JDBC_DEFAULT_SCHEMA[scheme]}.{table}"
    if database:
        name = f"{database}.{name}"
    return f"{scheme}://{parts.netloc}", name


def kafka_datasets(bootstrap_servers: str, topics: list[str]) -> list[DatasetName]:
    """``h1:9092,h2:9092`` + ``[t]`` → [(``kafka://h1:9092``, ``t``)]: the cluster is named by
    the first server of the list, as it was given."""
    first = bootstrap_servers.split(",")[0].strip()
    return [(f"kafka://{first}", topic) for topic in topics]


def kafka_topics(options: Mapping[str, str]) -> list[str]:
    """The topics a Kafka source's options name: ``subscribe`` (a comma-separated list) or
    ``assign`` (JSON, topic → partitions); none for ``subscribePattern`` (no name to give)."""
    if subscribe := options.get("subscribe"):
        return list(dict.fromkeys(t.strip() for t in subscribe.split(",") if t.strip()))
    if assign := options.get("assign"):
        return list(json.loads(assign))
    return []
