"""Read back what landed in a Kafka topic, independently of the code under test.

Two ways to read. :func:`read_topic` waits for an expected number of records — for
"these arrived". :func:`read_through_markers` reads up to marker records produced after
the events under test — for "nothing else arrived": absence is proven by reading past
the point where a refused event would be, never by waiting a while and seeing nothing,
which a dead or slow reader would also pass. Both raise on any consumer error other than
end-of-partition, so a broken reader fails the test instead of returning nothing.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

__all__ = ["Record", "read_all_produced_so_far", "read_through_markers", "read_topic"]


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
    seconds so that unexpected extra records are seen too. Not a proof of absence: use
    :func:`read_through_markers` for that."""
    with _reading(bootstrap, topic) as consumer:
        records: list[Record] = []
        deadline = time.monotonic() + timeout
        settle_until: float | None = None
        while time.monotonic() < deadline:
            if len(records) >= expect:
                settle_until = settle_until or time.monotonic() + settle
                if time.monotonic() >= settle_until:
                    break
            record = _next_record(consumer)
            if record is not None:
                records.append(record)
        return records


def read_through_markers(
    bootstrap: str, topic: str, marker: bytes, *, markers: int = 1, timeout: float = 30.0
) -> list[Record]:
    """Every record of ``topic`` before the markers — records whose value contains
    ``marker`` — once ``markers`` of them were read; a partition is read no further than
    its marker. Raises ``TimeoutError`` if the markers do not all show up.

    Kafka keeps order within a partition, so a marker produced (or posted through the
    proxy with the same key) after the event under test sits behind it: whatever the
    event produced is read before the marker, or never was produced."""
    with _reading(bootstrap, topic) as consumer:
        records: list[Record] = []
        marked: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(marked) < markers:
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"{topic}: {len(marked)} of {markers} markers read in {timeout} s "
                    f"({len(records)} records before them)"
                )
            record = _next_record(consumer)
            if record is None or record.partition in marked:
                continue
            if marker in record.value:
                marked.add(record.partition)
            else:
                records.append(record)
        return records


_MARKER_PREFIX = b"marker-"


def read_all_produced_so_far(bootstrap: str, topic: str, *, timeout: float = 30.0) -> list[Record]:
    """Every record produced to ``topic`` before this call, nothing missing: one marker
    goes to each partition, then each partition is read up to its marker.

    Also the way round the test broker's quirk of showing a partition's last produced
    batch to readers only after the next produce: the marker is that next produce."""
    partitions = _partitions(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap})
    marker = _MARKER_PREFIX + str(uuid.uuid4()).encode()
    for partition in partitions:
        producer.produce(topic, marker, partition=partition)
    if producer.flush(10) != 0:
        raise RuntimeError(f"{topic}: marker messages not confirmed by the broker")
    records = read_through_markers(
        bootstrap, topic, marker, markers=len(partitions), timeout=timeout
    )
    # A test that polls calls this again and again: the markers of earlier calls were
    # produced by the reader, not by the code under test.
    return [r for r in records if not r.value.startswith(_MARKER_PREFIX)]


@contextmanager
def _reading(bootstrap: str, topic: str) -> Iterator[Consumer]:
    """A consumer assigned to every partition of ``topic`` from offset 0 (no group join,
    so reads are fast and touch no committed offsets)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "test-reader", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in _partitions(bootstrap, topic)])
        yield consumer
    finally:
        consumer.close()


def _partitions(bootstrap: str, topic: str) -> list[int]:
    """The topic's partitions; raises if it does not exist, since a missing topic would
    pass any "nothing landed" check (a typo in a test, or a destination never created).
    Asked by a consumer that may not create topics: a producer's metadata request would
    create the missing topic."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-reader",
            "allow.auto.create.topics": False,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
    finally:
        consumer.close()
    if metadata.error is not None:
        raise KafkaException(metadata.error)
    if not metadata.partitions:
        raise LookupError(f"topic {topic} has no partitions")
    return sorted(metadata.partitions)


def _next_record(consumer: Consumer) -> Record | None:
    msg: Message | None = consumer.poll(0.1)
    if msg is None:
        return None
    error = msg.error()
    if error is not None:
        if error.code() == KafkaError._PARTITION_EOF:
            return None
        raise KafkaException(error)
    key, partition, offset, value = msg.key(), msg.partition(), msg.offset(), msg.value()
    # The stub's types also cover a message being produced; a consumed one has its place,
    # and the test topics hold no tombstones or null headers.
    assert partition is not None and offset is not None and value is not None
    return Record(
        partition,
        offset,
        key.decode() if key is not None else None,
        value,
        dict(cast("list[tuple[str, bytes]]", msg.headers() or [])),
    )
