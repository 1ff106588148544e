"""Keyed messages wait in the proxy while their partition has PARTITION_WINDOW in flight.

librdkafka's idempotent producer cannot send them then anyway, and a batch that waits
past ``linger.ms`` makes its broker thread spin until the acknowledgement (issue 41). The
librdkafka producer here is a double that records what it was handed and delivers when
the test says, so the window's bookkeeping is checked exactly: order per partition, all
held messages handed over together, expired ones never handed, nothing lost.
"""

from __future__ import annotations

import asyncio
import threading
import time
import zlib
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from proxy.kafka.producer import PARTITION_WINDOW, KafkaProducer
from proxy.server.embedded_broker import free_port
from tests.support.waiting import wait_for

TOPIC = "t"
PARTITIONS = 3


class _Delivered:
    def __init__(self, key: str, value: bytes) -> None:
        self._key, self._value = key, value

    def key(self) -> bytes:
        return self._key.encode()

    def value(self) -> bytes:
        return self._value


class RecordingProducer:
    """Stands in for the librdkafka Producer: keeps each message and its callback."""

    def __init__(self) -> None:
        self.handed: list[tuple[str, bytes, Any]] = []
        self._lock = threading.Lock()
        self._due: list[tuple[Any, _Delivered]] = []

    def produce(self, topic: str, value: bytes, key: str, headers: Any, on_delivery: Any) -> None:
        self.handed.append((key, value, on_delivery))

    def deliver(self, count: int) -> None:
        """Report the oldest ``count`` handed messages not yet reported as delivered."""
        with self._lock:
            for key, value, callback in self.handed[:count]:
                self._due.append((callback, _Delivered(key, value)))
            del self.handed[:count]

    def poll(self, timeout: float) -> int:
        with self._lock:
            due, self._due = self._due, []
        for callback, message in due:
            callback(None, message)
        if not due:
            time.sleep(min(timeout, 0.005))
        return len(due)

    def __len__(self) -> int:
        return len(self.handed)

    def flush(self, timeout: float) -> int:
        return 0


def _keys_of_one_partition(count: int) -> list[str]:
    keys = [f"run:{i}" for i in range(1000)]
    return [k for k in keys if zlib.crc32(k.encode()) % PARTITIONS == 0][:count]


async def _producer() -> tuple[KafkaProducer, RecordingProducer]:
    producer = KafkaProducer({"bootstrap.servers": f"127.0.0.1:{free_port()}"})
    producer.start()
    current = producer._current
    assert current is not None
    double = RecordingProducer()
    # The double stands in for the librdkafka Producer by the calls made here, not by type.
    current.producer = double  # type: ignore[assignment]
    producer._partition_counts = {TOPIC: PARTITIONS}
    return producer, double


async def test_a_full_partition_holds_its_messages_then_hands_them_over_together_in_order():
    producer, double = await _producer()
    try:
        keys = _keys_of_one_partition(PARTITION_WINDOW + 3)
        other = next(k for k in (f"x{i}" for i in range(100)) if zlib.crc32(k.encode()) % 3 == 1)
        messages = [(f"v{i}".encode(), key, None) for i, key in enumerate(keys)]
        sending = asyncio.ensure_future(
            producer.produce_many(TOPIC, [*messages, (b"other", other, None)])
        )
        await asyncio.sleep(0.05)
        # The window's worth went to librdkafka; the rest waits; another partition does not.
        assert [value for _, value, _ in double.handed] == [
            *(f"v{i}".encode() for i in range(PARTITION_WINDOW)),
            b"other",
        ]
        assert producer.queued() == PARTITION_WINDOW + 1 + 3
        double.deliver(1)  # one acknowledged: the window has room, all three go at once
        await wait_for(lambda: len(double.handed) == PARTITION_WINDOW + 3, 5, "the held three")
        assert [value for _, value, _ in double.handed[-3:]] == [b"v5", b"v6", b"v7"]
        double.deliver(len(double.handed))
        outcomes = await asyncio.wait_for(sending, 5)
        assert not any(isinstance(o, KafkaException) for o in outcomes)
        assert [o.value() for o in outcomes] == [  # type: ignore[union-attr]
            *(f"v{i}".encode() for i in range(len(keys))),
            b"other",
        ]
        current = producer._current
        assert current is not None
        assert not current.holding and not current.pending
        assert all(lane.in_flight == 0 for lane in current.lanes.values())
    finally:
        producer.stop()


async def test_a_held_message_that_expired_is_never_handed_over():
    producer, double = await _producer()
    try:
        keys = _keys_of_one_partition(PARTITION_WINDOW + 1)
        first = asyncio.ensure_future(
            producer.produce_many(TOPIC, [(b"w", k, None) for k in keys[:PARTITION_WINDOW]])
        )
        await asyncio.sleep(0.02)
        late = await producer.produce_many(TOPIC, [(b"late", keys[-1], None)], wait_seconds=0.05)
        assert isinstance(late[0], KafkaException)
        assert late[0].args[0].code() == KafkaError._TIMED_OUT
        double.deliver(PARTITION_WINDOW)
        await asyncio.wait_for(first, 5)
        await asyncio.sleep(0.05)
        assert double.handed == []  # the expired one was dropped, not sent after its answer
        current = producer._current
        assert current is not None
        assert not current.holding and not current.pending
    finally:
        producer.stop()


async def test_messages_without_a_key_or_a_known_partition_count_are_not_held():
    producer, double = await _producer()
    try:
        producer._partition_counts = {}
        key = _keys_of_one_partition(1)[0]
        count = PARTITION_WINDOW + 2
        sending = asyncio.ensure_future(
            producer.produce_many(
                TOPIC,
                [(b"k", key, None)] * count + [(b"n", None, None)] * count,
            )
        )
        await asyncio.sleep(0.05)
        assert len(double.handed) == 2 * count
        double.deliver(2 * count)
        await asyncio.wait_for(sending, 5)
    finally:
        producer.stop()
