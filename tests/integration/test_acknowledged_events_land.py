"""The invariant every fault test builds on, in fair weather: from 32 concurrent clients,
every event that got a 2xx is in Kafka exactly once — in a topic the proxy created with
the cluster's replication (3 replicas, ``min.insync.replicas=2``), not a lone copy."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.support.figures import report
from tests.support.load import compare, kafka_run_ids, post_events
from tests.support.sample_events import rich_run_event

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


def _replication(bootstrap: str, topic: str) -> tuple[set[int], str]:
    """Replica counts of ``topic``'s partitions and its effective ``min.insync.replicas``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions.values()
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    return {len(p.replicas) for p in partitions}, configs["min.insync.replicas"].value


async def test_the_topic_the_proxy_creates_is_replicated_by_the_cluster(start_proxy, broker, topic):
    async with start_proxy() as url:
        load = await post_events(url, (rich_run_event() for _ in range(4)), concurrency=2)
    assert load.statuses == {200: 4}
    replicas, min_insync = _replication(broker.bootstrap_servers, topic)
    # topic_replication_factor null = CreateTopics with -1: the cluster's default (3).
    assert replicas == {broker.replication_factor} == {3}
    assert min_insync == "2"
