"""The test suite's own Kafka reader must fail loudly rather than report "nothing landed"."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from tests.support.kafka_reader import read_all_produced_so_far, read_through_markers

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for value in values:
        producer.produce(topic, value, key=b"one-key")
    assert producer.flush(10) == 0


def test_every_record_of_a_batched_produce_is_read_including_the_last_batch(broker, topic):
    values = [f"record-{i}".encode() for i in range(200)]
    _produce(broker.bootstrap_servers, topic, values)
    records = read_all_produced_so_far(broker.bootstrap_servers, topic)
    assert [r.value for r in records] == values


def test_a_marker_that_never_shows_up_fails_instead_of_proving_absence(broker, topic):
    _produce(broker.bootstrap_servers, topic, [b"something"])
    with pytest.raises(TimeoutError, match="0 of 1 markers"):
        read_through_markers(broker.bootstrap_servers, topic, b"never-produced", timeout=2)


def test_reading_a_topic_that_does_not_exist_fails_instead_of_finding_nothing(broker, topic):
    with pytest.raises(Exception, match=topic.replace(".", r"\.") + "|UNKNOWN_TOPIC"):
        read_all_produced_so_far(broker.bootstrap_servers, topic, timeout=5)
