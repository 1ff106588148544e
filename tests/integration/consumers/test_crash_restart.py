"""A consumer process killed with SIGKILL mid-stream and restarted (a real subprocess).

Nothing is committed before the kill (commit interval of an hour, and SIGKILL leaves no
chance to commit on the way out), so the restarted process reads every event again:
each one reaches Marquez at least once; without dedupe the ones delivered before the
kill are stored twice, with a dedupe journal none is. The Marquez double holds requests
once ``KILL_AFTER`` events are stored, so the kill lands at a known point: mid-stream,
with the last answered event already journaled (one run key → one lane, in order).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import aiohttp
import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition

from proxy.embedded_broker import free_port
from tests.conftest import REPO
from tests.doubles.marquez_double import MarquezDouble
from tests.integration.consumers.conftest import (
    FAST_RETRY,
    TEST_GROUP,
    encoded,
    produce,
    sequenced_run_events,
    wait_for,
)

pytestmark = pytest.mark.integration

EVENTS, KILL_AFTER = 60, 20


def _write_config(path: Path, bootstrap: str, topic: str, url: str, dedupe: bool) -> int:
    port = free_port()
    consumer = {
        "target": {"kind": "marquez", "url": url, "retry": FAST_RETRY},
        "topics": [topic],
        "group_id": f"group.{topic}",
        "group": TEST_GROUP,
        "commit_interval_seconds": 3600,
        "status_port": port,
        "dedupe": {"enabled": dedupe, "journal": "dedupe.journal"},
    }
    config = {"kafka": {"bootstrap_servers": bootstrap}, "consumers": {"m": consumer}}
    path.write_text(yaml.safe_dump(config))
    return port


def _start(config: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "proxy", "consume", "m", "--config", str(config)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


async def _duplicates_skipped(port: int) -> float:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as resp,
    ):
        text = await resp.text()
    for line in text.splitlines():
        if line.startswith("lineage_consumer_duplicates_skipped_total"):
            return float(line.split()[-1])
    raise AssertionError("no duplicates metric")


def _committed(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"group.{topic}"})
    try:
        [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return tp.offset
    finally:
        consumer.close()


@pytest.mark.parametrize("dedupe", [False, True], ids=["no-dedupe", "dedupe-journal"])
async def test_sigkill_mid_stream_then_restart_delivers_everything(
    broker, topic_with, tmp_path, dedupe
):
    topic = topic_with(1)
    events = sequenced_run_events(runs=1, per_run=EVENTS)
    config = tmp_path / "config.yaml"
    await asyncio.to_thread(produce, broker.bootstrap_servers, topic, encoded(events))
    async with MarquezDouble() as marquez:
        port = _write_config(config, broker.bootstrap_servers, topic, marquez.url, dedupe)
        marquez.hold_after(KILL_AFTER)
        first = _start(config)
        try:
            await wait_for(lambda: marquez.held > 0 or first.poll() is not None, what="hold")
            assert first.poll() is None, first.stderr.read().decode() if first.stderr else ""
        finally:
            first.send_signal(signal.SIGKILL)
            await asyncio.to_thread(first.wait)
        assert len(marquez.events) == KILL_AFTER
        marquez.release()

        second = _start(config)
        try:
            await wait_for(
                lambda: (
                    len({e["run"]["facets"]["seq"]["n"] for e in marquez.events}) == EVENTS
                    or second.poll() is not None
                ),
                within=60,
                what="every event after the restart",
            )
            skipped = await _duplicates_skipped(port)
        finally:
            second.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.to_thread(second.communicate, timeout=30)
        assert second.returncode == 0, stderr.decode()

    stored = Counter(e["run"]["facets"]["seq"]["n"] for e in marquez.events)
    assert set(stored) == set(range(EVENTS))  # at least once
    duplicates = sum(n - 1 for n in stored.values())
    if dedupe:
        assert duplicates == 0 and skipped == KILL_AFTER
    else:
        assert duplicates == KILL_AFTER and skipped == 0
    # SIGTERM finished the in-flight work, committed it and left the group.
    assert await asyncio.to_thread(_committed, broker.bootstrap_servers, topic) == EVENTS
