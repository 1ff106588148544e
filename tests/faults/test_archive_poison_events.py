"""Events that once broke the archive, mixed into good traffic from 32 clients.

A job namespace too long for a file name (300 ASCII bytes, 62 emoji, 90 ``/``) and an
``eventTime`` whose UTC instant falls off the calendar (``0001-01-01T00:00:00+01:00``,
``9999-12-31T23:59:59-01:00``) used to fail in the archive on every retry, adding a Kafka
copy each time, and to fail the good events sharing their group commit. Now each is
stored once (Kafka and archive) on its first try, and good events never notice them.
"""

from __future__ import annotations

import asyncio
import os
import random
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState

from proxy.destinations.archive.destination import finished_files
from tests.support.figures import report
from tests.support.load import compare, kafka_run_ids, post_events
from tests.support.sample_events import rich_run_event

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LONG_NAMESPACES = ["n" * 300, "😀" * 62, "/" * 90]
EDGE_TIMES = ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"]


def poison_events(copies: int) -> list[dict[str, Any]]:
    events = []
    for _ in range(copies):
        events += [rich_run_event(namespace=namespace) for namespace in LONG_NAMESPACES]
        for event_time in EDGE_TIMES:
            event = rich_run_event()
            event["eventTime"] = event_time
            events.append(event)
    return events


def archived_run_ids(directory: Path) -> Counter[str]:
    return Counter(
        orjson.loads(line)["run"]["runId"]
        for path in finished_files(directory)
        for line in path.read_bytes().splitlines()
    )


async def test_poison_events_are_stored_once_and_never_fail_good_ones(
    start_proxy, broker, topic, tmp_path: Path
):
    good = [rich_run_event() for _ in range(400)]
    poison = poison_events(6)
    mixed = good + poison
    random.Random(7).shuffle(mixed)
    async with start_proxy(routing={"archive_root": tmp_path}) as url:
        load = await post_events(url, mixed, concurrency=32)
    acked = set(load.acknowledged)
    in_kafka = kafka_run_ids(broker.bootstrap_servers, topic)
    in_archive = archived_run_ids(tmp_path / "events")
    poison_ids = {e["run"]["runId"] for e in poison}
    figures = report(
        "archive_poison_events_32_clients",
        sent=load.sent,
        poison_sent=len(poison),
        good_failed=sum(1 for e in good if e["run"]["runId"] not in acked),
        poison_acknowledged=len(poison_ids & acked),
        **compare(load.acknowledged, in_kafka),
        archive_lost=len(acked - set(in_archive)),
        archive_duplicates=sum(n - 1 for n in in_archive.values()),
    )
    assert load.statuses == {200: len(mixed)}, load.statuses
    assert figures["good_failed"] == 0 and figures["poison_acknowledged"] == len(poison)
    assert figures["lost"] == 0 and figures["duplicates"] == 0
    assert figures["archive_lost"] == 0 and figures["archive_duplicates"] == 0


async def test_openlineage_python_client_sends_each_poison_event_once(
    start_proxy, broker, topic, tmp_path: Path, monkeypatch
):
    """The real client retries on 503; a poison event must not make it try at all."""
    for name in [n for n in os.environ if n.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(name)
    events = [
        RunEvent(
            eventType=RunState.COMPLETE,
            eventTime=event_time,
            run=Run(runId=str(uuid.uuid4())),
            job=Job(namespace=namespace, name="poison"),
            producer="https://github.com/lineage-proxy/tests",
        )
        for namespace, event_time in [
            *((n, "2026-11-23T10:00:00+00:00") for n in LONG_NAMESPACES),
            *(("team-a", t) for t in EDGE_TIMES),
        ]
    ]
    async with start_proxy(routing={"archive_root": tmp_path}) as url:
        monkeypatch.setenv("OPENLINEAGE_URL", url)
        client = OpenLineageClient()
        for event in events:
            await asyncio.to_thread(client.emit, event)
        await asyncio.to_thread(client.close)
    sent = [e.run.runId for e in events]
    in_kafka = kafka_run_ids(broker.bootstrap_servers, topic)
    assert in_kafka == Counter(sent)  # one copy each: no retry happened
    assert archived_run_ids(tmp_path / "events") == Counter(sent)
