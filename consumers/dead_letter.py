"""The dead-letter topic: where a message goes when its target will never take it.

Events the target refuses (permanent failures) and poison messages (not a JSON object)
are produced to ``<topic>.dlq`` with the original key, value and headers plus ``dlq_*``
headers saying why, so an operator can read, fix and replay them. A retriable failure
never comes here: the consumer waits for its target instead.
Producing to the DLQ is retried until it works: the source offset is committed only
after the message is safely somewhere.
"""

from __future__ import annotations

import asyncio
import logging
from typing import cast

from confluent_kafka import KafkaException, Message

from proxy.destinations.base import DeliveryError
from proxy.destinations.http.destination import HttpDeliveryError
from proxy.destinations.kafka_producer import KafkaProducer
from proxy.destinations.retry import RetryConfig, backoff_seconds

__all__ = ["DeadLetterTopic", "dead_letter_headers"]

log = logging.getLogger(__name__)

_PRODUCE_BACKOFF = RetryConfig(initial_backoff_seconds=0.2, max_backoff_seconds=10)


def dead_letter_headers(
    message: Message, consumer: str, reason: str, error: DeliveryError | None
) -> list[tuple[str, bytes | None]]:
    """The source message's headers plus why it was dead-lettered and where it came from."""
    # A consumed message's headers are a list, a null value None; the stub types them
    # with the list-or-dict union that produce() accepts.
    source = cast("list[tuple[str, bytes | None]]", message.headers() or [])
    headers = [(k, v) for k, v in source if not k.startswith("dlq_")]
    headers += [
        ("dlq_reason", reason.encode()),
        ("dlq_consumer", consumer.encode()),
        ("dlq_source_topic", (message.topic() or "").encode()),
        ("dlq_source_partition", str(message.partition()).encode()),
        ("dlq_source_offset", str(message.offset()).encode()),
    ]
    if isinstance(error, HttpDeliveryError):
        if error.status is not None:
            headers.append(("dlq_http_status", str(error.status).encode()))
        if error.excerpt:
            headers.append(("dlq_response_excerpt", error.excerpt.encode()))
    if error is not None:
        headers.append(("dlq_retriable", b"true" if error.retriable else b"false"))
    return headers


class DeadLetterTopic:
    def __init__(self, producer: KafkaProducer, topic_pattern: str, consumer: str) -> None:
        self._producer = producer
        self._pattern = topic_pattern
        self._consumer = consumer

    def topic_for(self, source_topic: str) -> str:
        return self._pattern.format(topic=source_topic)

    async def send(self, message: Message, reason: str, error: DeliveryError | None) -> None:
        """Produce ``message`` to its dead-letter topic; retries until the broker has it."""
        topic = self.topic_for(message.topic() or "")
        key = message.key()
        headers = dead_letter_headers(message, self._consumer, reason, error)
        attempt = 0
        while True:
            try:
                await self._producer.produce(
                    topic,
                    message.value() or b"",
                    key.decode("utf-8", "replace") if key is not None else None,
                    headers,
                )
                return
            except KafkaException as exc:
                attempt += 1
                log.warning("dead-letter produce to %s failed (%s); retrying", topic, exc)
                await asyncio.sleep(backoff_seconds(attempt, _PRODUCE_BACKOFF))
