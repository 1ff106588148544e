"""The archive as Spark sees it: ``spark.read.json(dir)`` with no options reads every
finished file, plain and gzip, skips files in progress, and gives ``dt`` and
``namespace`` back as partition columns with the original namespace strings."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from proxy.destinations.archive.destination import ArchiveWriter
from tests.support.sample_events import dataset_event, rich_run_event

pytestmark = pytest.mark.spark


async def _archive(directory: Path, events: list[dict], *, gzip: bool) -> ArchiveWriter:
    writer = ArchiveWriter(directory, gzip=gzip)
    await writer.start()
    for event in events:
        await writer.write(event, orjson.dumps(event))
    return writer


def _in_progress_files(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.name.endswith(".inprogress")]


async def test_spark_reads_the_archive_as_it_is(tmp_path: Path, spark):
    events = []
    for namespace, event_time in [
        ("team-a", "2026-11-23T10:00:00Z"),
        ("team-a", "2026-11-24T01:00:00+02:00"),  # 2026-11-23 in UTC
        ("s3://bucket", "2026-11-24T10:00:00Z"),
        ("équipe=données", "2026-11-24T11:00:00Z"),
        ("123", "2026-11-24T12:00:00Z"),
    ]:
        event = rich_run_event(namespace=namespace)
        event["eventTime"] = event_time
        events.append(event)
    dataset = dataset_event(namespace="hdfs://nn:8020", name="/data/x")
    dataset["eventTime"] = "2026-11-25T00:00:00Z"
    events.append(dataset)
    await (await _archive(tmp_path, events[:3], gzip=False)).close()
    await (await _archive(tmp_path, events[3:], gzip=True)).close()
    unfinished = rich_run_event(namespace="team-a")
    unfinished["eventTime"] = "2026-11-23T12:00:00Z"
    live = await _archive(tmp_path, [unfinished], gzip=False)  # still writing
    assert _in_progress_files(tmp_path)

    # Namespaces are strings even when they look like numbers ("123").
    inference = "spark.sql.sources.partitionColumnTypeInference.enabled"
    spark.conf.set(inference, "false")
    try:
        frame = spark.read.json(str(tmp_path))
        rows = frame.select("dt", "namespace", "eventTime").collect()
        first = frame.where("namespace = 's3://bucket'").select("outputs").first()
    finally:
        spark.conf.unset(inference)
    await live.close()
    got = sorted((str(r.dt), r.namespace, r.eventTime) for r in rows)
    assert got == sorted(
        [
            ("2026-11-23", "team-a", "2026-11-23T10:00:00Z"),
            ("2026-11-23", "team-a", "2026-11-24T01:00:00+02:00"),
            ("2026-11-24", "s3://bucket", "2026-11-24T10:00:00Z"),
            ("2026-11-24", "équipe=données", "2026-11-24T11:00:00Z"),
            ("2026-11-24", "123", "2026-11-24T12:00:00Z"),
            ("2026-11-25", "hdfs://nn:8020", "2026-11-25T00:00:00Z"),
        ]
    )
    # The nested event survives: outputs are readable as structs.
    assert first is not None and first.outputs[0].name == "sales.daily"
