"""Kafka destination: produce with acks=all + idempotence, resolve when the broker has it.

librdkafka reports deliveries from ``poll()``; a small thread polls and hands each report
back to the event loop with ``call_soon_threadsafe``, so the loop never blocks on Kafka
and concurrent requests share the producer's batches (``linger.ms``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from proxy.destinations.base import DeliveryError
from proxy.openlineage import event_key, event_kind, subject_name
from proxy.openlineage.repaired import RepairedEvent

__all__ = [
    "KafkaDestination",
    "KafkaProducer",
    "event_headers",
    "producer_settings",
    "refuse_weaker_durability",
]

log = logging.getLogger(__name__)

# What makes "2xx means durable" true; user settings may not override these.
_DURABLE = {"acks": "all", "enable.idempotence": True}
_DEFAULTS: dict[str, Any] = {
    "linger.ms": 5,
    "compression.type": "lz4",
    # Answer 503 before openlineage-python's own ~5 s timeout fires, so the client
    # hears "retry" instead of guessing.
    "delivery.timeout.ms": 4000,
    "request.timeout.ms": 3000,
    "socket.keepalive.enable": True,
}


def refuse_weaker_durability(overrides: Mapping[str, Any]) -> None:
    """Raise ValueError when user settings try to weaken acks=all or idempotence."""
    forced = {"acks": ("all", "-1", -1), "enable.idempotence": (True, "true")}
    for key, allowed in forced.items():
        if key in overrides and overrides[key] not in allowed:
            raise ValueError(
                f"producer.{key}={overrides[key]!r} would break the promise that a 2xx "
                "means the event is durable; remove it"
            )


def producer_settings(
    bootstrap_servers: str, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """librdkafka settings: our defaults, then the user's, then the durability guarantees."""
    return {
        **_DEFAULTS,
        "bootstrap.servers": bootstrap_servers,
        **(overrides or {}),
        **_DURABLE,
    }


def event_headers(event: dict[str, Any]) -> list[tuple[str, bytes]]:
    """Headers that let consumers filter without parsing the JSON body."""
    headers: list[tuple[str, bytes]] = []
    kind = event_kind(event)
    if kind is not None:
        headers.append(("ol_kind", kind.value.encode()))
    event_type = event.get("eventType")
    if isinstance(event_type, str):
        headers.append(("ol_event_type", event_type.encode()))
    if (subject := subject_name(event)) is not None:
        headers.append(("ol_namespace", subject[0].encode()))
        headers.append(("ol_name", subject[1].encode()))
    producer = event.get("producer")
    if isinstance(producer, str):
        headers.append(("ol_producer", producer.encode()))
    if isinstance(event, RepairedEvent):
        headers.append(("ol_repairs", event.header_value()))
    return headers


class KafkaProducer:
    """An asyncio face on one librdkafka producer; shared by every Kafka destination."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self._producer: Producer | None = None
        self._poller: threading.Thread | None = None
        self._stopping = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        # Delivery reports collected during one poll(), handed to the loop in one wake-up:
        # one call_soon_threadsafe per message would wake the loop thousands of times/s.
        self._reports: deque[tuple[asyncio.Future[Message], KafkaError | None, Message]] = deque()

    def start(self) -> None:
        self._producer = Producer(self.settings, logger=logging.getLogger("librdkafka"))
        self._poller = threading.Thread(target=self._poll_loop, name="kafka-poll", daemon=True)
        self._poller.start()

    def _poll_loop(self) -> None:
        assert self._producer is not None
        while not self._stopping.is_set():
            self._producer.poll(0.05)
            self._hand_over_reports()

    def _on_delivery(
        self, done: asyncio.Future[Message], err: KafkaError | None, msg: Message
    ) -> None:
        # Runs inside poll()/flush() on a librdkafka-serving thread: only queue the outcome.
        self._reports.append((done, err, msg))

    def _hand_over_reports(self) -> None:
        if not self._reports or self._loop is None:
            return
        batch = []
        while self._reports:
            batch.append(self._reports.popleft())
        try:
            self._loop.call_soon_threadsafe(_settle_all, batch)
        except RuntimeError:
            log.warning("event loop closed with %d delivery reports unread", len(batch))

    async def produce(
        self,
        topic: str,
        value: bytes,
        key: str | None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> Message:
        """Resolve with the delivered message (partition, offset), or raise KafkaException."""
        if self._producer is None:
            raise RuntimeError("producer not started")
        loop = self._loop = self._loop or asyncio.get_running_loop()
        done: asyncio.Future[Message] = loop.create_future()
        on_delivery = functools.partial(self._on_delivery, done)

        deadline: float | None = None
        while True:
            try:
                self._producer.produce(
                    topic, value=value, key=key, headers=headers, on_delivery=on_delivery
                )
                break
            except BufferError:
                # Local queue full: wait for reports to drain it, within the delivery budget.
                budget = float(self.settings.get("delivery.timeout.ms", 4000)) / 1e3
                deadline = deadline or time.monotonic() + budget
                if time.monotonic() > deadline:
                    raise KafkaException(
                        KafkaError(KafkaError._QUEUE_FULL, "local producer queue full")
                    ) from None
                await asyncio.sleep(0.005)
        return await done

    def cluster_reachable(self, timeout: float) -> bool:
        """Blocking metadata request; call from a thread."""
        if self._producer is None:
            return False
        try:
            self._producer.list_topics(timeout=timeout)
        except KafkaException:
            return False
        return True

    def ensure_topics(self, topics: Mapping[str, tuple[int, int]], timeout: float = 10.0) -> None:
        """Create missing topics (name → (partitions, replication)); blocking, call at start."""
        admin = AdminClient(self.settings)
        new = [NewTopic(name, p, r) for name, (p, r) in topics.items()]
        for name, future in admin.create_topics(new, request_timeout=timeout).items():
            try:
                future.result(timeout=timeout)
                log.info("created Kafka topic %s", name)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise

    def flush(self, timeout: float) -> int:
        """Blocking: wait for outstanding deliveries; returns how many are still queued."""
        if self._producer is None:
            return 0
        return int(self._producer.flush(timeout))

    def stop(self) -> None:
        self._stopping.set()
        if self._poller is not None:
            self._poller.join(timeout=5)
        self._hand_over_reports()  # reports served by a final flush()
        self._producer = None


def _settle_all(
    reports: list[tuple[asyncio.Future[Message], KafkaError | None, Message]],
) -> None:
    for done, err, msg in reports:
        if done.done():
            continue
        if err is not None:
            done.set_exception(KafkaException(err))
        else:
            done.set_result(msg)


class KafkaDestination:
    """Deliver events to one topic with a message key computed from the event."""

    durable = True

    def __init__(
        self,
        name: str,
        producer: KafkaProducer,
        topic: str,
        *,
        key_for: Callable[[dict[str, Any]], str | None] = event_key,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.topic = topic
        self._producer = producer
        self._key_for = key_for
        self._extra_headers = [(k, v.encode()) for k, v in (extra_headers or {}).items()]

    async def start(self) -> None:
        """The shared producer's lifetime is owned by whoever created it."""

    async def deliver(self, event: dict[str, Any], payload: bytes) -> None:
        headers = event_headers(event) + self._extra_headers
        try:
            await self._producer.produce(self.topic, payload, self._key_for(event), headers)
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            # Everything but a message the broker will never take is worth retrying.
            permanent = err.code() in (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_MSG_SIZE)
            raise DeliveryError(self.name, err.str(), retriable=not permanent) from exc

    async def ready(self) -> bool:
        return await asyncio.to_thread(self._producer.cluster_reachable, 2.0)

    async def close(self) -> None:
        """Nothing of its own to close: the shared producer is flushed by its owner."""
