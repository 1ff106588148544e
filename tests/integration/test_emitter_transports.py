"""The Spark emitter's delivery through the openlineage-python client's transports, to
real receivers: the proxy over http (events land in Kafka), and Kafka directly."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from spark_emitter.config import spark_transport
from spark_emitter.delivery import EventSender, open_client
from tests.support.kafka_cluster import KafkaCluster
from tests.support.kafka_reader import Record, read_all_produced_so_far
from tests.unit.spark_emitter.test_delivery import lineage_event

pytestmark = pytest.mark.integration

T = "spark.openlineage.transport."


def _sender(conf: dict[str, str]) -> EventSender:
    client = open_client(spark_transport(conf))
    assert client is not None
    return EventSender(client)


async def test_http_transport_to_the_proxy_lands_every_event_in_kafka(
    start_proxy, broker: KafkaCluster, topic: str
) -> None:
    events = [lineage_event(n, kind) for n in range(3) for kind in ("START", "COMPLETE")]
    async with start_proxy() as url:
        sender = _sender({T + "type": "http", T + "url": url})
        for event in events:
            assert sender.submit(event)
        assert await asyncio.to_thread(sender.close, 30)
    assert (sender.stats.sent, sender.stats.failed) == (len(events), 0)
    records = await asyncio.to_thread(read_all_produced_so_far, broker.bootstrap_servers, topic)
    landed = sorted((r["run"]["runId"], r["eventType"]) for r in map(_value, records))
    assert landed == sorted((e["run"]["runId"], e["eventType"]) for e in events)


async def test_kafka_transport_produces_each_event_keyed_by_its_root_job(
    broker: KafkaCluster, topic: str
) -> None:
    events = [lineage_event(n) for n in range(3)]
    sender = _sender(
        {
            T + "type": "kafka",
            T + "topicName": topic,
            T + "properties.bootstrap.servers": broker.bootstrap_servers,
            T + "properties.acks": "all",
        }
    )
    for event in events:
        assert sender.submit(event)
    assert await asyncio.to_thread(sender.close, 30)
    assert (sender.stats.sent, sender.stats.failed) == (len(events), 0)
    records = await asyncio.to_thread(read_all_produced_so_far, broker.bootstrap_servers, topic)
    assert [(r.key, _value(r)["job"]["name"]) for r in records] == [
        ("run:etl/app", event["job"]["name"]) for event in events
    ]


def _value(record: Record) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(record.value)
    return value
