"""A consumer daemon SIGKILLed in the middle of a rebalance of its 2-member group, on
Apache Kafka: at least once, each run's events in order, nothing good dead-lettered.

Member A delivers to Marquez (double) until the double holds its requests; member B then
joins the group, the coordinator rebalances, and A is killed while it is in its revoke
callback (its log says "revoked", deliveries still in flight). B must end with every
partition — after A's session times out — and deliver from the committed offsets.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest
import yaml

from proxy.server.embedded_broker import free_port
from tests.support.consumers import (
    FAST_RETRY,
    TEST_GROUP,
    consume_process,
    create_topic,
    dead_letter_count,
    encoded,
    produce,
    seq,
    sequenced_run_events,
)
from tests.support.doubles.marquez_double import MarquezDouble
from tests.support.figures import report
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RUNS, PER_RUN, HOLD_AFTER, PARTITIONS = 12, 25, 60, 6


def _write_config(path: Path, bootstrap: str, topic: str, url: str) -> None:
    consumer = {
        "target": {"kind": "marquez", "url": url, "retry": FAST_RETRY},
        "topics": [topic],
        "group_id": f"group.{topic}",
        "group": TEST_GROUP,
        "commit_interval_seconds": 0.2,
        "status_port": free_port(),
    }
    config = {"kafka": {"bootstrap_servers": bootstrap}, "consumers": {"m": consumer}}
    path.write_text(yaml.safe_dump(config))


async def test_consumer_killed_during_rebalance_delivers_all_in_order_per_run(
    broker, topic, tmp_path
):
    await asyncio.to_thread(create_topic, broker.bootstrap_servers, topic, PARTITIONS)
    events = sequenced_run_events(runs=RUNS, per_run=PER_RUN)
    await asyncio.to_thread(produce, broker.bootstrap_servers, topic, encoded(events))
    async with MarquezDouble() as marquez:
        configs = [tmp_path / "a.yaml", tmp_path / "b.yaml"]
        for config in configs:
            _write_config(config, broker.bootstrap_servers, topic, marquez.url)
        marquez.hold_after(HOLD_AFTER)
        first = consume_process(configs[0], "m")
        second = None
        try:
            await wait_for(lambda: marquez.held > 0 or first.poll() is not None, what="hold")
            assert first.poll() is None, first.log()
            second = consume_process(configs[1], "m")
            await wait_for(
                lambda: "revoked" in first.log() or first.poll() is not None,
                within=60,
                what="member A in its revoke callback",
            )
            first.send_signal(signal.SIGKILL)
            await asyncio.to_thread(first.wait)
            killed_at = time.monotonic()
            delivered_before_kill = len(marquez.events)
            marquez.release()
            expected = {seq(event) for _, event in events}
            await wait_for(
                lambda: {seq(e) for e in marquez.events} >= expected or second.poll() is not None,
                within=120,
                what="member B to deliver everything",
            )
            recovered_at = time.monotonic()
            assert second.poll() is None, second.log()
        finally:
            for process in (first, second):
                if process is not None and process.poll() is None:
                    process.send_signal(signal.SIGTERM)
                    await asyncio.to_thread(process.wait, 30)
        delivered = [seq(e) for e in marquez.events]
    dead_lettered = await asyncio.to_thread(dead_letter_count, broker.bootstrap_servers, topic)
    figures = report(
        "kafka_consumer_sigkill_during_rebalance",
        sent=len(events),
        delivered=len(delivered),
        delivered_before_kill=delivered_before_kill,
        found=len(set(delivered)),
        lost=len(expected - set(delivered)),
        duplicates=len(delivered) - len(set(delivered)),
        dead_lettered=dead_lettered,
        seconds_to_recover=round(recovered_at - killed_at, 1),
    )
    assert figures["lost"] == 0  # at least once
    assert dead_lettered == 0
    # Order per run: the first delivery of each event comes in the run's order (a run
    # handed over after the kill is delivered again from its committed offset onwards).
    by_run: dict[str, list[int]] = {}
    for job, n in delivered:
        by_run.setdefault(job, []).append(n)
    for job, numbers in by_run.items():
        firsts = list(dict.fromkeys(numbers))
        assert firsts == list(range(PER_RUN)), (job, numbers)
    assert second.returncode == 0, second.log()
