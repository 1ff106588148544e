"""A producer fenced after a broker replacement is replaced without an ERROR traceback.

librdkafka's idempotent producer reports UNKNOWN_PRODUCER_ID (fatal) once a replaced or
paused broker forgot its producer id; confluent-kafka may raise it from ``poll()``. That
is expected, not a bug: the producer is replaced and the log says so in one line. The
``poll()`` that raises is a double around a real librdkafka producer (a real fencing
needs a broker to forget producer state, which the embedded broker does not do on cue)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from proxy.kafka.producer import KafkaProducer
from proxy.server.embedded_broker import free_port
from tests.support.waiting import wait_for


class FencedOnPollDouble:
    """Wraps a real Producer; its first ``poll()`` raises UNKNOWN_PRODUCER_ID (fatal)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.raised = False

    def poll(self, timeout: float) -> int:
        if not self.raised:
            self.raised = True
            raise KafkaException(
                KafkaError(KafkaError.UNKNOWN_PRODUCER_ID, "unknown producer id", fatal=True)
            )
        return int(self.real.poll(timeout))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


async def test_unknown_producer_id_from_poll_replaces_the_producer_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
):
    producer = KafkaProducer({"bootstrap.servers": f"127.0.0.1:{free_port()}"})
    with caplog.at_level(logging.INFO, logger="proxy.destinations.kafka.destination"):
        producer.start()
        first = producer._current
        assert first is not None and first.producer is not None
        # The double stands in for the librdkafka Producer by poll() alone, not by type.
        first.producer = FencedOnPollDouble(first.producer)  # type: ignore[assignment]
        try:
            await wait_for(lambda: producer._current is not first, 20, "a new producer")
        finally:
            producer.stop()
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert tracebacks == []
    assert any("replacing it" in r.getMessage() for r in caplog.records)
