"""Consumer behaviours that the real Marquez can judge, on the real server: two daemons
sharing a group store every event once, in order per run; ``replay`` stores an archive in
event-time order. What Marquez stored, and in which order, is read from its own table
(``lineage_events`` by ``created_at``: it stores an event before it answers 201).

The other consumer tests keep the Marquez double, for what the real server cannot be made
to do on demand (docs/contributing/marquez-tests.md, "The Marquez double").
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import orjson
import pytest

from consumers.replay import ReplayFilter, parse_time, replay
from proxy.config.settings import ProxyConfig
from proxy.destinations.archive.destination import ArchiveWriter
from tests.support.consumers import (
    assert_in_order_per_run,
    consumer_config,
    encoded,
    metric,
    produce,
    running,
    sequenced_run_events,
)
from tests.support.marquez import MarquezServer
from tests.support.sample_events import run_event
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.marquez, pytest.mark.xdist_group("marquez")]


def _stored(server: MarquezServer, namespace: str) -> list[dict[str, Any]]:
    """The events of ``namespace`` that ``server`` stored, in the order it stored them
    (a duplicate is stored again: Marquez has no idempotency)."""
    events = (orjson.loads(row) for row in server.arrival_order())
    return [e for e in events if e["job"]["namespace"] == namespace]


async def test_two_daemons_in_one_group_store_every_event_once_in_order_per_run(
    marquez, broker, topic_with
):
    server = marquez["proxied"]
    namespace = f"group-{uuid.uuid4().hex[:8]}"
    topic = topic_with(4)
    events = sequenced_run_events(runs=12, per_run=25, namespace=namespace)
    config = consumer_config({"kind": "marquez", "url": server.url}, topic)
    async with (
        running(broker.bootstrap_servers, config, "a") as first,
        running(broker.bootstrap_servers, config, "b") as second,
    ):
        await wait_for(
            lambda: len(first.health()[1]["assigned"]) + len(second.health()[1]["assigned"]) == 4,
            what="both members to share the 4 partitions",
        )
        await asyncio.to_thread(produce, broker.bootstrap_servers, topic, encoded(events))
        await wait_for(
            lambda: sum(metric(d, "delivered") for d in (first, second)) >= len(events),
            within=120,
            what="every event delivered",
        )
    stored = await asyncio.to_thread(_stored, server, namespace)
    by_run = assert_in_order_per_run(stored)
    assert {job: len(ns) for job, ns in by_run.items()} == {f"job{r}": 25 for r in range(12)}
    assert len(stored) == len(events)  # a clean hand-over stores nothing twice
    delivered = [metric(d, "delivered") for d in (first, second)]
    assert all(n > 0 for n in delivered) and sum(delivered) == len(events)


async def test_replay_stores_the_archive_in_marquez_in_event_time_order(marquez, tmp_path):
    server = marquez["proxied"]
    namespace = f"replay-{uuid.uuid4().hex[:8]}"
    # Archived out of time order, across two days and with a non-UTC offset.
    times = [
        "2026-11-21T10:00:05Z",
        "2026-11-20T23:59:59Z",
        "2026-11-21T09:00:00+01:00",
        "2026-11-20T12:00:00Z",
        "2026-11-22T00:00:00Z",
    ]
    archived = [{**run_event(namespace=namespace, name="nightly"), "eventTime": t} for t in times]
    writer = ArchiveWriter(tmp_path)
    await writer.start()
    for event in archived:
        await writer.write(event, orjson.dumps(event))
    await writer.close()
    config = ProxyConfig.model_validate(
        {
            "kafka": {"bootstrap_servers": "embedded"},
            "consumers": {"backfill": {"target": {"kind": "marquez", "url": server.url}}},
        }
    )
    result = await replay(config.consumers, config.kafka, tmp_path, "backfill", ReplayFilter())
    assert (result.sent, result.failed) == (len(archived), 0)
    stored = await asyncio.to_thread(_stored, server, namespace)
    assert [parse_time(e["eventTime"]) for e in stored] == sorted(parse_time(t) for t in times)
    assert sorted(e["run"]["runId"] for e in stored) == sorted(e["run"]["runId"] for e in archived)
