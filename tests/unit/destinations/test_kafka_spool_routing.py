"""When the Kafka destination sends an event straight to Kafka and when to its spool.

The spool is real (files under tmp_path); the producer is ``ProducerDouble``: it confirms
or times out every message as told, like librdkafka's delivery reports would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import KafkaError, KafkaException

from proxy.destinations.base import DeliveryError
from proxy.destinations.kafka import spool_drainer as kafka_spool_module
from proxy.destinations.kafka.destination import KafkaDestination
from proxy.destinations.kafka.spool import Spool
from proxy.destinations.kafka.spool_drainer import KafkaSpool
from tests.support.sample_events import run_event
from tests.support.waiting import wait_for


class ProducerDouble:
    """Stands in for KafkaProducer: ``delivering`` as set; ``produce_many`` records each
    message and confirms it, or reports a delivery timeout for it while ``timing_out``."""

    def __init__(self) -> None:
        self.delivering = True
        self.timing_out = False
        self.sent: list[tuple[str, bytes, str | None]] = []
        # What a spool records as its cluster at start (spool_dirs.record_cluster).
        self.settings = {"bootstrap.servers": "127.0.0.1:9092"}
        self.answered_at: float | None = 0.0

    async def produce_many(
        self, topic: str, messages: list[tuple[bytes, str | None, Any]], wait_seconds: Any = None
    ) -> list[Any]:
        if self.timing_out:
            timed_out = KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, "timed out"))
            return [timed_out for _ in messages]
        self.sent += [(topic, value, key) for value, key, _ in messages]
        return [None for _ in messages]


async def _destination(tmp_path: Path) -> tuple[KafkaDestination, KafkaSpool, ProducerDouble]:
    producer = ProducerDouble()
    # ProducerDouble stands in for KafkaProducer by its produce_many() alone, not by type.
    spool = KafkaSpool(Spool(tmp_path, 1 << 20, 1 << 16), producer)  # type: ignore[arg-type]
    await spool.spool.open()  # no drainer: what is spooled stays there for the test
    destination = KafkaDestination("kafka", producer, "t", spool=spool)  # type: ignore[arg-type]
    return destination, spool, producer


async def _deliver(destination: KafkaDestination, event: dict[str, Any]) -> bool:
    return await destination.deliver(event, orjson.dumps(event))


async def test_an_event_kafka_confirms_goes_straight_to_kafka(tmp_path: Path):
    destination, spool, producer = await _destination(tmp_path)
    assert await _deliver(destination, run_event()) is False
    assert len(producer.sent) == 1 and spool.spool.events == 0
    await spool.spool.close()


async def test_a_timed_out_event_is_spooled_and_later_events_of_its_key_follow_it(
    tmp_path: Path,
):
    destination, spool, producer = await _destination(tmp_path)
    producer.timing_out = True
    start = run_event(name="job-a", event_type="START")
    assert await _deliver(destination, start) is True
    producer.timing_out = False  # the broker is back, the spool not drained yet
    run_id = start["run"]["runId"]
    complete = run_event(name="job-a", event_type="COMPLETE", run_id=run_id)
    other = run_event(name="job-b")
    assert await _deliver(destination, complete) is True  # behind its START
    assert await _deliver(destination, other) is False  # another key: straight on
    assert [key for _, _, key in producer.sent] == [f"run:{other['run']['runId']}"]
    spooled = await spool.spool.read(10)
    assert [orjson.loads(r.value)["eventType"] for r in spooled] == ["START", "COMPLETE"]
    await spool.spool.close()


async def test_while_kafka_is_known_down_events_are_spooled_without_waiting(tmp_path: Path):
    destination, spool, producer = await _destination(tmp_path)
    producer.delivering = False
    assert await _deliver(destination, run_event()) is True
    assert producer.sent == [] and spool.spool.events == 1
    await spool.spool.close()


class ReachableProducerDouble(ProducerDouble):
    """ProducerDouble whose cluster answers metadata requests (the broker is up)."""

    def cluster_reachable(self, timeout: float) -> bool:
        return True


async def test_not_ready_while_held_keys_wait_behind_a_spool_that_refuses(tmp_path: Path):
    """The broker answers again, but the spool is full (the next event would not fit)
    and holds keys whose later events must queue behind it: they get 503, so /readyz
    must not say 200 (issue 25, item 7)."""
    producer = ReachableProducerDouble()
    spool = KafkaSpool(Spool(tmp_path, 3000, 1 << 16), producer)  # type: ignore[arg-type]
    await spool.spool.open()  # no drainer: the spool stays as full as it is
    destination = KafkaDestination("kafka", producer, "t", spool=spool)  # type: ignore[arg-type]
    producer.delivering = False
    refused = 0
    for _ in range(10):
        try:
            await _deliver(destination, run_event(name="held"))
        except DeliveryError:
            refused += 1
    assert refused and spool.spool.bytes < spool.spool.max_bytes
    producer.delivering = True  # the broker is back; the drain has not caught up
    assert not await destination.ready()
    assert "full" in (destination.readiness() or {}).get("refusing", "")
    await spool.spool.close()


class RefusingProducerDouble(ReachableProducerDouble):
    """The broker answers and confirms other messages (``delivering``), but every
    message of the drain fails retriably, e.g. a topic it may not write to."""

    async def produce(self, topic: str, value: bytes, key: Any, headers: Any = None) -> Any:
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "not allowed"))


async def test_a_wedged_drain_makes_the_destination_not_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(kafka_spool_module, "_WEDGED_SECONDS", 0.2)
    producer = RefusingProducerDouble()
    spool = KafkaSpool(Spool(tmp_path, 1 << 20, 1 << 16), producer)  # type: ignore[arg-type]
    destination = KafkaDestination("kafka", producer, "t", spool=spool)  # type: ignore[arg-type]
    await spool.start()
    try:
        await spool.store("t", "run:a/b", [], b"{}")
        await wait_for(lambda: spool.refusing_reason() is not None, what="a wedged drain")
        assert "no progress" in (spool.refusing_reason() or "")
        assert not await destination.ready()
    finally:
        await spool.close()
