"""The object-store archive as replay reads it: finished objects by archive day, fetched
one day at a time into a temporary directory, so the day is sorted by the same code as a
local archive's (:mod:`consumers.sorted_day`) and disk use stays one day.

Only completed objects are listed (an upload in progress is invisible in object storage),
and names starting with ``_`` or ``.`` are skipped as in a directory. How to reach the
store: the settings of a configured ``object_archive`` target writing to the same bucket
(endpoint, region, credentials, path style), else the AWS chain and ``AWS_ENDPOINT_URL``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from consumers.config import ConsumerConfig
from proxy.destinations.object_archive.config import ObjectArchiveDestinationConfig
from proxy.destinations.object_archive.destination import config_client, s3_client

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["ObjectDay", "download_day", "object_days", "store_client"]

# (key, size) of each finished object of one day.
ObjectDay = list[tuple[str, int]]


def store_client(bucket: str, consumers: Mapping[str, ConsumerConfig]) -> S3Client:
    """A client of ``bucket``'s store, set up like the consumer that writes to it."""
    for consumer in consumers.values():
        target = consumer.target
        if isinstance(target, ObjectArchiveDestinationConfig) and target.bucket == bucket:
            return config_client(target)
    return s3_client()


def object_days(
    client: S3Client,
    bucket: str,
    prefix: str,
    kept_day: Callable[[str, str], date | None],
) -> dict[date, ObjectDay]:
    """Finished objects under ``prefix`` by archive day, oldest day first;
    ``kept_day(day_dir, namespace_dir)`` prunes (None: left out)."""
    start = f"{prefix}/" if prefix else ""
    days: dict[date, ObjectDay] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=start):
        for item in page.get("Contents", []):
            parts = item["Key"].removeprefix(start).split("/")
            if len(parts) != 3 or parts[2].startswith(("_", ".")):
                continue
            day = kept_day(parts[0], parts[1])
            if day is not None:
                days.setdefault(day, []).append((item["Key"], item["Size"]))
    return dict(sorted(days.items()))


def download_day(
    client: S3Client, bucket: str, objects: Iterable[tuple[str, int]], directory: Path
) -> list[Path]:
    """Fetch a day's objects into ``directory`` (names keep their ``.gz`` suffix)."""
    paths = []
    for number, (key, _) in enumerate(objects):
        path = directory / f"{number:06d}-{key.rsplit('/', 1)[-1]}"
        client.download_file(bucket, key, str(path))
        paths.append(path)
    return paths
