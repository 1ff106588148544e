"""The proxy holds keyed messages back per partition (proxy/kafka/producer.py, issue 41)
by recomputing librdkafka's choice of partition: CRC-32 of the key modulo the partition
count (its default partitioner, ``consistent_random``). Should librdkafka's default ever
change (to murmur2, as the Java client's), holding back would wait on the wrong
partitions: this pins the recomputation to where the messages really go."""

from __future__ import annotations

import asyncio
import uuid
import zlib
from collections.abc import Callable

from confluent_kafka import Message

from proxy.kafka.producer import KafkaProducer
from proxy.kafka.settings import producer_settings
from tests.support.kafka_cluster import KafkaCluster

PARTITIONS = 3


async def test_keyed_messages_land_in_the_partition_the_proxy_holds_them_for(
    broker: KafkaCluster, topic_with: Callable[[int], str]
):
    topic = topic_with(PARTITIONS)
    producer = KafkaProducer(producer_settings(broker.bootstrap_servers))
    producer.start()
    try:
        assert await asyncio.to_thread(producer.cluster_reachable, 10.0)
        assert producer._partition_counts[topic] == PARTITIONS
        keys = [f"run:{uuid.uuid4()}" for _ in range(60)] + ["job:ünïcode/ключ"]
        outcomes = await producer.produce_many(topic, [(b"{}", key, None) for key in keys], 30)
        for key, outcome in zip(keys, outcomes, strict=True):
            assert isinstance(outcome, Message), outcome
            assert outcome.partition() == zlib.crc32(key.encode()) % PARTITIONS, key
        current = producer._current
        assert current is not None
        assert not current.holding
        assert all(lane.in_flight == 0 for lane in current.lanes.values())
        assert len(current.lanes) == PARTITIONS
    finally:
        await asyncio.to_thread(producer.flush, 10)
        producer.stop()
