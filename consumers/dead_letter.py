"""The dead-letter topic: where a message goes when its target will never take it.

Events the target refuses (permanent failures) and poison messages (not a JSON object)
are produced to ``<topic>.dlq`` with the original key, value and headers plus ``dlq_*``
headers saying why, so an operator can read, fix and replay them. A retriable failure
never comes here: the consumer waits for its target instead.

Producing to the DLQ is retried until it works, whatever stops it (the producer raises;
the topic refuses the record: missing and not creatable, larger than its
``max.message.bytes``, not writable for the daemon's user): the source offset is committed
only after the message is safely somewhere, so a dead letter that cannot be written
blocks its lane (other lanes go on) and holds its partition's committed offset. While
one waits, :meth:`DeadLetterTopic.problem` says why (``/healthz``), every failed attempt
is counted, and the log says it once per topic every 10 s.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import cast

from confluent_kafka import Message

from proxy.destinations.base import DeliveryError
from proxy.destinations.http.destination import HttpDeliveryError
from proxy.destinations.retry import RetryConfig, backoff_seconds
from proxy.kafka.client_logs import failure_reason
from proxy.kafka.producer import KafkaProducer
from proxy.support.throttled_log import ThrottledLog

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
    """Writes dead letters for one consumer; never gives one up (see the module doc)."""

    def __init__(
        self,
        producer: KafkaProducer,
        topic_pattern: str,
        consumer: str,
        on_failure: Callable[[], None] = lambda: None,
    ) -> None:
        """``on_failure`` is called for every failed attempt (the daemon counts them)."""
        self._producer = producer
        self._pattern = topic_pattern
        self._consumer = consumer
        self._on_failure = on_failure
        self._log = ThrottledLog(log)
        # Dead letters whose write failed and is being tried again, since when the oldest
        # of this stretch waits, and why the latest attempt failed.
        self.waiting = 0
        self._waiting_since = 0.0
        self._last_failure = ""

    def topic_for(self, source_topic: str) -> str:
        return self._pattern.format(topic=source_topic)

    def problem(self) -> str | None:
        """What /healthz says while dead letters cannot be written; None when none waits."""
        if not self.waiting:
            return None
        return (
            f"{self.waiting} dead letter(s) cannot be written for "
            f"{time.monotonic() - self._waiting_since:.0f} s ({self._last_failure}); "
            "their lanes wait and their offsets are not committed"
        )

    async def send(self, message: Message, reason: str, error: DeliveryError | None) -> None:
        """Produce ``message`` to its dead-letter topic; retries until the broker has it."""
        topic = self.topic_for(message.topic() or "")
        key = message.key()
        headers = dead_letter_headers(message, self._consumer, reason, error)
        attempt = 0
        try:
            while True:
                try:
                    await self._producer.produce(
                        topic,
                        message.value() or b"",
                        key.decode("utf-8", "replace") if key is not None else None,
                        headers,
                    )
                    return
                except Exception as exc:  # whatever it is, the message is not safe yet
                    attempt += 1
                    if attempt == 1:
                        self._started_waiting()
                    self._failed(topic, message, exc)
                    await asyncio.sleep(backoff_seconds(attempt, _PRODUCE_BACKOFF))
        finally:
            if attempt:
                self.waiting -= 1

    def _started_waiting(self) -> None:
        if not self.waiting:
            self._waiting_since = time.monotonic()
        self.waiting += 1

    def _failed(self, topic: str, message: Message, exc: Exception) -> None:
        self._last_failure = f"{topic}: {failure_reason(exc)}"
        self._on_failure()
        self._log.warning(
            f"dead-letter-write:{topic}",
            "dead letter of %s[%d]@%d cannot be written to %s (%s); retrying, the "
            "offset is not committed past it",
            message.topic(),
            message.partition(),
            message.offset(),
            topic,
            failure_reason(exc),
        )
