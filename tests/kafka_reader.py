"""Read back what landed in a Kafka topic, independently of the code under test."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: str | None
    value: bytes
    headers: dict[str, bytes]


def read_topic(
    bootstrap: str, topic: str, *, expect: int, timeout: float = 20.0, settle: float = 0.3
) -> list[Record]:
    """All records of ``topic`` from the start; waits for ``expect`` then ``settle`` more
    seconds so that unexpected extra records are seen too. Assigns partitions directly
    (no group join) so reads are fast and touch no committed offsets."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "test-reader", "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records: list[Record] = []
        deadline = time.monotonic() + timeout
        settle_until: float | None = None
        while time.monotonic() < deadline:
            if len(records) >= expect:
                settle_until = settle_until or time.monotonic() + settle
                if time.monotonic() >= settle_until:
                    break
            msg = consumer.poll(0.1)
            if msg is None or msg.error():
                continue
            key = msg.key()
            records.append(
                Record(
                    msg.partition(),
                    msg.offset(),
                    key.decode() if key is not None else None,
                    msg.value(),
                    dict(msg.headers() or []),
                )
            )
        return records
    finally:
        consumer.close()
