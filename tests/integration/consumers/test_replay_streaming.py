"""A large archive day replays in bounded memory: every event lands once, in event-time
order, while Python's allocations stay far below the size of the day."""

from __future__ import annotations

import asyncio
import io
import random
import tracemalloc
from datetime import UTC, datetime, timedelta

import orjson
import pytest

import consumers.sorted_day
from consumers.replay import ReplayFilter, replay
from proxy.config.settings import ProxyConfig
from proxy.destinations.archive.destination import ArchiveWriter, finished_files
from tests.support.kafka_reader import read_topic
from tests.support.sample_events import run_event

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EVENTS = 20_000
START = datetime(2026, 11, 21, tzinfo=UTC)


async def _archive_day(directory) -> tuple[list[str], int]:
    """EVENTS events of one day, ~2.5 KB each, in shuffled time order across several
    files of two namespaces; their runIds in event-time order, and the day's bytes."""
    rng = random.Random(19)
    seconds = rng.sample(range(86_400 * 10), EVENTS)  # distinct times: one right order
    writer = ArchiveWriter(directory, max_file_bytes=8 * 1024 * 1024)
    await writer.start()
    events, size = [], 0
    for n, tenths in enumerate(seconds):
        event = run_event(namespace=f"team-{n % 2}", name="nightly")
        event["eventTime"] = (START + timedelta(seconds=tenths / 10)).isoformat()
        event["job"]["facets"]["padding"] = {"text": "x" * 2200}
        events.append(event)
    for start in range(0, EVENTS, 1000):
        batch = events[start : start + 1000]
        payloads = [orjson.dumps(e) for e in batch]
        size += sum(map(len, payloads))
        await asyncio.gather(*(writer.write(e, p) for e, p in zip(batch, payloads, strict=True)))
    await writer.close()
    assert len(list(finished_files(directory))) >= 4  # several files to merge
    ordered = sorted(events, key=lambda e: e["eventTime"])
    return [e["run"]["runId"] for e in ordered], size


async def test_a_day_of_20k_events_replays_in_order_without_being_held(
    broker, topic, tmp_path, monkeypatch
):
    expected, day_bytes = await _archive_day(tmp_path)
    # Small runs, so that this day spills several (production: 32 MiB), bounding what is held.
    monkeypatch.setattr(consumers.sorted_day, "RUN_BYTES", 2 * 1024 * 1024)
    config = ProxyConfig.model_validate(
        {"kafka": {"bootstrap_servers": broker.bootstrap_servers, "topic_partitions": 1}}
    )
    tracemalloc.start()
    try:
        result = await replay(
            {},
            config.kafka,
            tmp_path,
            topic,
            ReplayFilter(),
            io.StringIO(),
            to_topic=True,
            create_topic=True,
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (result.sent, result.failed, result.unreadable) == (EVENTS, 0, 0)
    # Held whole, the day's payloads alone would be day_bytes (its dicts several times
    # more); streamed, one run and one read window of 1,000 events are (~12 MB here).
    assert peak < day_bytes / 2.5, (peak, day_bytes)
    records = await asyncio.to_thread(
        read_topic, broker.bootstrap_servers, topic, expect=EVENTS, timeout=120
    )
    assert [orjson.loads(r.value)["run"]["runId"] for r in records] == expected
