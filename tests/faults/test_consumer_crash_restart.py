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
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.support.consumers import (
    FAST_RETRY,
    TEST_GROUP,
    committed_offsets,
    consume_process,
    consume_until,
    dead_letter_count,
    encoded,
    produce,
    sequenced_run_events,
)
from tests.support.doubles.marquez_double import MarquezDouble
from tests.support.ports import free_port
from tests.support.waiting import wait_for

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


async def _kill_once_held(marquez: MarquezDouble, config: Path) -> None:
    """Run consumer ``m`` until Marquez holds requests after ``KILL_AFTER`` stored
    events, then SIGKILL it (nothing committed: the commit interval is an hour)."""
    marquez.hold_after(KILL_AFTER)
    first = consume_process(config, "m")
    try:
        await wait_for(lambda: marquez.held > 0 or first.poll() is not None, what="hold")
        assert first.poll() is None, first.log()
    finally:
        first.send_signal(signal.SIGKILL)
        await asyncio.to_thread(first.wait)


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
        await _kill_once_held(marquez, config)
        assert len(marquez.events) == KILL_AFTER
        marquez.release()

        skipped = await consume_until(
            config,
            "m",
            port,
            lambda: len({e["run"]["facets"]["seq"]["n"] for e in marquez.events}) == EVENTS,
        )

    stored = Counter(e["run"]["facets"]["seq"]["n"] for e in marquez.events)
    assert set(stored) == set(range(EVENTS))  # at least once
    duplicates = sum(n - 1 for n in stored.values())
    if dedupe:
        assert duplicates == 0 and skipped == KILL_AFTER
    else:
        assert duplicates == KILL_AFTER and skipped == 0
    # SIGTERM finished the in-flight work, committed it and left the group.
    committed = await asyncio.to_thread(
        committed_offsets, broker.bootstrap_servers, f"group.{topic}", topic, 1
    )
    assert committed == [EVENTS]


async def test_a_dead_letter_is_not_written_twice_after_a_crash_with_the_dedupe_journal(
    broker, topic_with, tmp_path
):
    """The first event is refused by Marquez (422, dead-lettered), then the process is
    killed before it commits; the restarted one must not dead-letter it again (issue 25)."""
    topic = topic_with(1)
    events = sequenced_run_events(runs=1, per_run=EVENTS)
    key, refused = events[0]
    refused = {**refused, "job": {**refused["job"], "name": None}}  # Marquez: 422
    config = tmp_path / "config.yaml"
    await asyncio.to_thread(
        produce, broker.bootstrap_servers, topic, encoded([(key, refused), *events[1:]])
    )
    async with MarquezDouble() as marquez:
        port = _write_config(config, broker.bootstrap_servers, topic, marquez.url, dedupe=True)
        await _kill_once_held(marquez, config)
        marquez.release()
        await consume_until(
            config,
            "m",
            port,
            lambda: len({e["run"]["facets"]["seq"]["n"] for e in marquez.events}) == EVENTS - 1,
        )
    dead = await asyncio.to_thread(dead_letter_count, broker.bootstrap_servers, topic)
    assert dead == 1  # the first process dead-lettered it; the second one skipped it
