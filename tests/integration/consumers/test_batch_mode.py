"""Batch mode: a generic HTTP target that takes JSON arrays gets events many per POST."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from aiohttp import web

from tests.support.consumers import (
    consumer_config,
    encoded,
    metric,
    produce,
    running,
    seq,
    sequenced_run_events,
)
from tests.support.doubles.target_double import TargetDouble
from tests.support.kafka_reader import read_topic
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


class StrictReceiver(TargetDouble):
    """Refuses (400) a whole array if any event in it has an unknown eventType."""

    def __init__(self) -> None:
        super().__init__()
        self.posts: list[int] = []  # events per accepted POST

    async def answer(self, request: web.Request, body: bytes) -> web.Response:
        events = orjson.loads(body)
        if any(e.get("eventType") == "BOGUS" for e in events):
            return web.json_response({"error": "unknown eventType"}, status=400)
        self.posts.append(len(events))
        return await super().answer(request, body)


async def test_batches_are_arrays_in_order_and_one_bad_event_is_isolated(broker, topic_with):
    topic = topic_with(3)
    events = sequenced_run_events(runs=3, per_run=40)
    bogus_key, bogus = events[61]
    bogus["eventType"] = "BOGUS"
    async with StrictReceiver() as receiver:
        target = {"kind": "http", "url": receiver.url + receiver.path, "batch_events": 25}
        config = consumer_config(target, topic)
        async with running(broker.bootstrap_servers, config) as daemon:
            await asyncio.to_thread(produce, broker.bootstrap_servers, topic, encoded(events))
            await wait_for(lambda: len(receiver.events) >= len(events) - 1, what="events")
            await wait_for(lambda: metric(daemon, "dead_lettered", why="refused") == 1)
    received = [seq(e) for e in receiver.events]
    expected = [seq(e) for _, e in events if e is not bogus]
    assert sorted(received) == sorted(expected) and len(received) == len(expected)
    for run in {job for job, _ in received}:
        numbers = [n for job, n in received if job == run]
        assert numbers == sorted(numbers)
    assert max(receiver.posts) > 1  # arrays, not one event per POST
    dlq = await asyncio.to_thread(read_topic, broker.bootstrap_servers, f"{topic}.dlq", expect=1)
    assert [orjson.loads(r.value) for r in dlq] == [bogus]
    assert dlq[0].key == bogus_key
