"""The ``kafka`` target republishes each event to another topic, keyed like the proxy."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from tests.support.consumers import (
    consumer_config,
    encoded,
    metric,
    produce,
    running,
    sequenced_run_events,
)
from tests.support.kafka_reader import read_topic
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


async def test_kafka_target_republishes_every_event_with_its_run_key(broker, topic_with):
    topic = topic_with(3)
    events = sequenced_run_events(runs=3, per_run=5)
    out = f"{topic}.copy"
    config = consumer_config({"kind": "kafka", "topic": out}, topic)
    async with running(broker.bootstrap_servers, config) as daemon:
        await asyncio.to_thread(produce, broker.bootstrap_servers, topic, encoded(events))
        await wait_for(lambda: metric(daemon, "delivered") == len(events), what="delivered")
    records = await asyncio.to_thread(read_topic, broker.bootstrap_servers, out, expect=len(events))
    assert sorted((r.key, orjson.loads(r.value)["run"]["facets"]["seq"]["n"]) for r in records) == (
        sorted((k, e["run"]["facets"]["seq"]["n"]) for k, e in events)
    )
    assert all(r.headers["ol_kind"] == b"run" for r in records)
