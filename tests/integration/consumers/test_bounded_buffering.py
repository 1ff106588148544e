"""A consumer far behind its topic holds a bounded number of events between Kafka and the
target, and still delivers every one of them."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Producer

from proxy.destinations.archive.destination import finished_files
from tests.support.consumers import consumer_config, running
from tests.support.figures import report
from tests.support.sample_events import run_event
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EVENTS, RUNS = 30_000, 200
MAX_BUFFERED, MAX_BUFFERED_BYTES = 2_000, 512 * 1024


def _produce_backlog(bootstrap: str, topic: str) -> set[str]:
    """EVENTS events keyed by RUNS runs, each with its own run id; returns the run ids."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    run_ids = set()
    for i in range(EVENTS):
        event = run_event(name=f"job{i % RUNS}")
        run_ids.add(event["run"]["runId"])
        while True:
            try:
                producer.produce(topic, orjson.dumps(event), key=f"run:team-a/job{i % RUNS}")
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    return run_ids


def _archived_run_ids(directory: Path) -> list[str]:
    return [
        orjson.loads(line)["run"]["runId"]
        for path in finished_files(directory)
        for line in path.read_bytes().splitlines()
    ]


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def test_archive_consumer_far_behind_holds_at_most_its_bound_and_archives_everything(
    broker, topic_with, tmp_path
):
    topic = topic_with(3)
    produced = await asyncio.to_thread(_produce_backlog, broker.bootstrap_servers, topic)
    directory = tmp_path / "archive"
    config = consumer_config(
        {"kind": "archive", "directory": str(directory)},
        topic,
        concurrency=64,
        max_buffered=MAX_BUFFERED,
        max_buffered_bytes=MAX_BUFFERED_BYTES,
        dead_letter={"enabled": False},
    )
    rss_before, rss_peak = _rss_mib(), 0.0
    sampling = threading.Event()

    def sample_rss() -> None:
        nonlocal rss_peak
        while not sampling.wait(0.05):
            rss_peak = max(rss_peak, _rss_mib())

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    try:
        async with running(broker.bootstrap_servers, config) as daemon:
            await wait_for(
                lambda: daemon.metrics.delivered._value.get() >= EVENTS,
                within=120,
                what="the whole backlog archived",
            )
            peak_messages, peak_bytes = daemon.source.peak_buffered
    finally:
        sampling.set()
        sampler.join()
    archived = _archived_run_ids(directory)
    lost = produced - set(archived)
    report(
        "test_archive_consumer_far_behind_holds_at_most_its_bound_and_archives_everything",
        sent=EVENTS,
        found=len(set(archived)),
        lost=len(lost),
        duplicates=len(archived) - len(set(archived)),
        peak_buffered_messages=peak_messages,
        peak_buffered_bytes=peak_bytes,
        rss_growth_mib=round(rss_peak - rss_before, 1),
    )
    assert not lost
    assert 0 < peak_messages <= MAX_BUFFERED
    assert 0 < peak_bytes <= MAX_BUFFERED_BYTES
    # librdkafka's prefetch is capped too (8 MiB): the process grows by a few MiB, far
    # less than the backlog would take as Python objects (about 60 MB).
    assert rss_peak - rss_before < 100
