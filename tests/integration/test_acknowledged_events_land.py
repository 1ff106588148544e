"""The invariant every fault test builds on, in fair weather: from 32 concurrent clients,
every event that got a 2xx is in Kafka exactly once."""

from __future__ import annotations

import pytest

from tests.faults.figures import report
from tests.sample_events import rich_run_event
from tests.support.load import compare, kafka_run_ids, post_events

pytestmark = pytest.mark.integration


async def test_every_acknowledged_event_from_32_clients_is_in_kafka_once(
    start_proxy, broker, topic
):
    async with start_proxy() as url:
        load = await post_events(url, (rich_run_event() for _ in range(400)), concurrency=32)
    found = kafka_run_ids(broker.bootstrap_servers, topic)
    figures = report("fair_weather_32_clients", sent=load.sent, **compare(load.acknowledged, found))
    assert load.statuses == {200: 400}
    assert figures["lost"] == 0 and figures["duplicates"] == 0
    assert figures["found"] == 400
