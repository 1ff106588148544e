"""The Kafka producer every Kafka destination (and the consumers' dead-letter writer)
shares: produce with acks=all + idempotence, resolve when the broker has it.

librdkafka reports deliveries from ``poll()``; a small thread polls and hands each report
back to the event loop with ``call_soon_threadsafe``, so the loop never blocks on Kafka
and concurrent requests share the producer's batches (``linger.ms``). What one
destination adds (message keys, headers, the spool) is :mod:`proxy.destinations.kafka.destination`.

Keyed messages wait here, per partition, while librdkafka could not send them anyway: its
idempotent producer creates a partition's next ProduceRequest only while fewer than
:data:`PARTITION_WINDOW` of the partition's messages are in flight, and a batch that has
lingered ``linger.ms`` but may not be sent makes the partition's broker thread poll its
socket with a zero timeout until the acknowledgement comes — a busy loop for as long as the
broker takes to acknowledge (on a replicated cluster, milliseconds per request; that loop
was most of the proxy's extra CPU per event there). Held back in Python until the window
has room, a partition's messages leave together in the next request, as they would have,
without the spinning. See docs/contributing/benchmark-history.md (issue 41).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
import zlib
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from proxy.kafka.client_logs import kafka_client_config

__all__ = ["KafkaProducer", "refused_for_good"]

# The logger name from before the producer had its own module: operators' filters know it.
log = logging.getLogger("proxy.destinations.kafka.destination")


class KafkaProducer:
    """An asyncio face on a librdkafka producer; shared by every Kafka destination.

    librdkafka can put an idempotent producer into a fatal state it never leaves (a broker
    paused or replaced forgets the producer id: ``UNKNOWN_PRODUCER_ID``, fenced epochs).
    So the librdkafka producer is never trusted forever: when it reports a fatal error,
    the poll thread builds a new one, purges the old one and fails whatever it still held
    as retriable, so those clients hear 503 and resend. One producer instance is one
    *generation*; deliveries remember theirs.
    """

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self._current: _Generation | None = None
        self._generations = 0
        self._poller: threading.Thread | None = None
        self._stopping = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._next_replacement = 0.0
        # A producer whose messages only time out for this long, although the broker may
        # well be back, is replaced too: some idempotence states never recover by
        # themselves. When the broker really is down the new one fails the same way.
        delivery_timeout = float(settings.get("delivery.timeout.ms", 4000)) / 1e3
        self._stall_seconds = max(10.0, 3 * delivery_timeout)
        # Delivery reports collected during one poll(), handed to the loop in one wake-up:
        # one call_soon_threadsafe per message would wake the loop thousands of times/s.
        self._reports: deque[_Report] = deque()
        # Set by librdkafka's error callback when no broker answers; cleared by a delivery.
        self.brokers_down = False
        self.last_delivered = time.monotonic()
        self.last_timed_out = 0.0
        # Unix time a broker last answered a request (metadata, a delivery); None until
        # one has since start. A TCP connect is no answer: a frozen broker accepts those.
        self.answered_at: float | None = None
        self.started_at = time.time()
        # Partitions per topic, from the metadata of the last readiness check (see
        # cluster_reachable); a topic not in it is not held back (see _lane_of).
        self._partition_counts: dict[str, int] = {}
        # Holding back by partition needs to know a key's partition: librdkafka's default
        # partitioner (consistent_random: CRC-32 of the key modulo the partition count).
        self._holds_back = settings.get("partitioner", "consistent_random") in (
            "consistent_random",
            "consistent",
        )

    def start(self) -> None:
        self._current = self._new_generation()
        self._poller = threading.Thread(target=self._poll_loop, name="kafka-poll", daemon=True)
        self._poller.start()

    def _new_generation(self) -> _Generation:
        self._generations += 1
        generation = _Generation(self._generations)
        generation.producer = Producer(
            kafka_client_config(self.settings, functools.partial(self._on_error, generation))
        )
        return generation

    @property
    def healthy(self) -> bool:
        """False while the poll thread is dead or the producer is fatally broken."""
        current = self._current
        alive = self._poller is not None and self._poller.is_alive()
        return alive and current is not None and current.fatal is None

    @property
    def delivering(self) -> bool:
        """False while the broker is known not to confirm: no broker answers, the
        producer is being replaced, or the latest outcome was a timeout. Any confirmed
        delivery (a spool drainer's too) makes it True again."""
        return self.healthy and not self.brokers_down and self.last_timed_out <= self.last_delivered

    def _poll_loop(self) -> None:
        while not self._stopping.is_set():
            current = self._current
            assert current is not None and current.producer is not None
            try:
                current.producer.poll(0.05)
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if isinstance(err, KafkaError) and _breaks_producer(err):
                    # Expected after a broker was replaced or paused (UNKNOWN_PRODUCER_ID,
                    # fenced epoch): not a bug, so no traceback; the producer is replaced.
                    current.fatal = current.fatal or err
                else:
                    log.exception("Kafka poll raised; polling goes on")
                    time.sleep(0.05)
            except Exception:
                # A raising callback must not end delivery reports for everyone.
                log.exception("Kafka poll raised; polling goes on")
                time.sleep(0.05)
            self._hand_over_reports()
            now = time.monotonic()
            if current.fatal is None and current.stalled(now, self._stall_seconds):
                current.fatal = _STALLED
            if current.fatal is not None and now >= self._next_replacement:
                self._replace(current)

    def _on_error(self, generation: _Generation, err: KafkaError) -> None:
        # Runs inside poll() on the poll thread.
        if _breaks_producer(err):
            generation.fatal = generation.fatal or err
        elif err.code() == KafkaError._ALL_BROKERS_DOWN:
            self.brokers_down = True
        # The cluster's log (proxy/kafka/client_logs.py) has reported the error, throttled.

    def _on_delivery(
        self,
        generation: _Generation,
        sends: _Sends,
        index: int,
        lane: _Lane | None,
        err: KafkaError | None,
        msg: Message,
    ) -> None:
        # Runs inside poll()/flush() on a librdkafka-serving thread: only queue the outcome.
        if err is None:
            self.brokers_down = False
            generation.last_delivered = self.last_delivered = time.monotonic()
            self.answered_at = time.time()
        elif err.code() == KafkaError._MSG_TIMED_OUT:
            generation.last_timed_out = self.last_timed_out = time.monotonic()
        elif _breaks_producer(err):
            generation.fatal = generation.fatal or err
        self._reports.append((generation, sends, index, lane, err, msg))

    def _replace(self, old: _Generation) -> None:
        """Swap in a new librdkafka producer; fail what the old one held as retriable."""
        # At most one replacement a second, should a broker keep fencing new producers.
        self._next_replacement = time.monotonic() + 1.0
        log.error(
            "Kafka producer %d cannot deliver any more (%s); replacing it, its %d "
            "undelivered events fail as retriable (spooled, or 503 without a spool)",
            old.number,
            old.fatal.str() if old.fatal else "?",
            len(old.pending),
        )
        try:
            self._current = self._new_generation()
        except KafkaException:
            log.exception("could not create a new Kafka producer; trying again")
            return
        assert old.producer is not None
        try:
            old.producer.purge(in_queue=True, in_flight=True, blocking=False)
            old.producer.poll(0)  # serves the purged messages' reports
        except Exception:
            log.exception("purging the broken Kafka producer failed")
        self._hand_over_reports()
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(_fail_pending, old)
        old.producer = None  # destroyed here, off the event loop

    def _hand_over_reports(self) -> None:
        if not self._reports or self._loop is None:
            return
        batch = []
        while self._reports:
            batch.append(self._reports.popleft())
        try:
            self._loop.call_soon_threadsafe(self._settle_all, batch)
        except RuntimeError:
            log.warning("event loop closed with %d delivery reports unread", len(batch))

    async def produce(
        self,
        topic: str,
        value: bytes,
        key: str | None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        wait_seconds: float | None = None,
    ) -> Message:
        """Resolve with the delivered message (partition, offset), or raise KafkaException
        — also when ``wait_seconds`` pass first (the message stays queued and may still be
        delivered)."""
        [outcome] = await self.produce_many(topic, [(value, key, headers)], wait_seconds)
        if isinstance(outcome, KafkaException):
            raise outcome
        return outcome

    async def produce_many(
        self,
        topic: str,
        messages: Sequence[tuple[bytes, str | None, Sequence[tuple[str, bytes | None]] | None]],
        wait_seconds: float | None = None,
    ) -> list[Message | KafkaException]:
        """Produce ``(value, key, headers)`` messages in order and wait for all of them on
        one future: per message, the delivered message or why not (a KafkaException, also
        for those not confirmed within ``wait_seconds``; they stay queued and may still be
        delivered). A batch costs one future and at most one timer, not one per message."""
        if self._current is None:
            raise RuntimeError("producer not started")
        loop = self._loop = self._loop or asyncio.get_running_loop()
        sends = _Sends(loop.create_future(), len(messages))
        deadline: float | None = None
        lane_of = self._lane_of
        for index, (value, key, headers) in enumerate(messages):
            while True:
                generation = self._current
                if generation.fatal is not None or generation.producer is None:
                    sends.settle(index, KafkaException(_REPLACING))
                    break
                lane = lane_of(generation, topic, key)
                if lane is not None and (lane.held or lane.in_flight >= PARTITION_WINDOW):
                    # librdkafka could not send it before an acknowledgement either:
                    # wait here, in order behind the partition's other held messages.
                    lane.held.append((topic, value, key, headers, sends, index))
                    generation.holding.add(lane)
                    generation.pending.add(sends)
                    break
                try:
                    self._hand_over(generation, lane, topic, value, key, headers, sends, index)
                    break
                except BufferError:
                    # Local queue full: wait for reports to drain it, within the delivery
                    # budget.
                    budget = float(self.settings.get("delivery.timeout.ms", 4000)) / 1e3
                    deadline = deadline or time.monotonic() + budget
                    if time.monotonic() > deadline:
                        sends.settle(index, KafkaException(_QUEUE_FULL))
                        break
                    await asyncio.sleep(0.005)
                except KafkaException as exc:
                    err: KafkaError = exc.args[0]
                    if _breaks_producer(err):
                        generation.fatal = generation.fatal or err
                        exc = KafkaException(_REPLACING)
                    sends.settle(index, exc)
                    break
        if sends.left:
            timer = None
            if wait_seconds is not None:
                timer = loop.call_later(wait_seconds, sends.expire, wait_seconds)
            try:
                await sends.done
            finally:
                if timer is not None:
                    timer.cancel()
        return sends.outcomes  # type: ignore[return-value]  # every one settled by now

    def _lane_of(self, generation: _Generation, topic: str, key: str | None) -> _Lane | None:
        """The partition ``key`` goes to, as librdkafka's partitioner picks it; None for
        messages not held back (no key, a topic whose partitions are not known yet, a
        partitioner of the user's)."""
        if key is None or not self._holds_back:
            return None
        count = self._partition_counts.get(topic)
        if not count:
            return None
        # A stale count (partitions added since the last check) holds back the wrong
        # partition for a second at most, costing only the spinning this avoids; while
        # the count stands a key always maps to one lane, so its messages keep their order
        # (as in librdkafka, a key's partition changes when partitions are added).
        partition = zlib.crc32(key.encode()) % count
        lane = generation.lanes.get((topic, partition))
        if lane is None:
            lane = generation.lanes[(topic, partition)] = _Lane()
        return lane

    def _hand_over(
        self,
        generation: _Generation,
        lane: _Lane | None,
        topic: str,
        value: bytes,
        key: str | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        sends: _Sends,
        index: int,
    ) -> None:
        """Give one message to librdkafka (BufferError, KafkaException as produce())."""
        assert generation.producer is not None
        generation.producer.produce(
            topic,
            value=value,
            key=key,
            # A copy: librdkafka's list type (str values too) cannot take ours.
            headers=list(headers) if headers is not None else None,
            on_delivery=functools.partial(self._on_delivery, generation, sends, index, lane),
        )
        generation.pending.add(sends)
        if lane is not None:
            lane.in_flight += 1

    def _settle_all(self, reports: list[_Report]) -> None:
        """Settle delivery reports (event loop), then send what partitions held back."""
        for generation, sends, index, lane, err, msg in reports:
            sends.settle(index, msg if err is None else KafkaException(err))
            if sends.left == 0:
                generation.pending.discard(sends)
            if lane is not None:
                lane.in_flight -= 1
        current = self._current
        if current is not None and current.holding:
            self._release(current)

    def _release(self, generation: _Generation) -> None:
        """Hand held messages to librdkafka, all of a partition's at once (one request),
        for every partition whose window has room again."""
        if generation.fatal is not None or generation.producer is None:
            return  # failed with the generation's other messages when it is replaced
        for lane in list(generation.holding):
            if lane.in_flight >= PARTITION_WINDOW:
                continue
            held = lane.held
            while held:
                topic, value, key, headers, sends, index = held[0]
                if sends.outcomes[index] is not None:  # expired or failed meanwhile
                    if sends.left == 0:
                        generation.pending.discard(sends)
                else:
                    try:
                        self._hand_over(generation, lane, topic, value, key, headers, sends, index)
                    except BufferError:
                        return  # librdkafka's queue is full: again at the next reports
                    except KafkaException as exc:
                        err: KafkaError = exc.args[0]
                        if _breaks_producer(err):
                            generation.fatal = generation.fatal or err
                            exc = KafkaException(_REPLACING)
                        sends.settle(index, exc)
                held.popleft()
                if generation.fatal is not None:
                    return
            generation.holding.discard(lane)

    def admin_client(self) -> AdminClient:
        """An admin client of the producer's cluster, with its connection and security
        settings."""
        return AdminClient(kafka_client_config(self.settings))

    def cluster_reachable(self, timeout: float) -> bool:
        """Whether a broker answers a metadata request within ``timeout`` (a request
        answered, not a connection accepted). Blocking; call from a thread."""
        current = self._current
        if current is None or current.producer is None or not self.healthy:
            return False
        try:
            metadata = current.producer.list_topics(timeout=timeout)
        except KafkaException:
            return False
        self.answered_at = time.time()
        # Where keyed messages go (see _lane_of): learnt from this answer, a second old.
        self._partition_counts = {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if topic.error is None and topic.partitions
        }
        return True

    def has_topic(self, topic: str, timeout: float = 10.0) -> bool:
        """Blocking: whether the cluster has ``topic`` (asks for every topic's metadata,
        so that asking creates nothing on a broker that auto-creates topics)."""
        current = self._current
        if current is None or current.producer is None:
            raise KafkaException(KafkaError(KafkaError._STATE, "producer not started"))
        return topic in current.producer.list_topics(timeout=timeout).topics

    def message_limit(self, topic: str, ask_broker: bool = True, timeout: float = 3.0) -> int:
        """Largest message (bytes, key and headers included) ``topic`` takes: the smaller
        of the producer's ``message.max.bytes`` and the topic's ``max.message.bytes`` as
        the broker reports it (the broker's default when the topic sets none). Blocking."""
        limit = int(self.settings.get("message.max.bytes", _LIBRDKAFKA_MESSAGE_MAX_BYTES))
        if not ask_broker:
            return limit
        admin = self.admin_client()
        resource = ConfigResource(ResourceType.TOPIC, topic)
        try:
            configs = admin.describe_configs([resource], request_timeout=timeout)[resource]
            entry = configs.result(timeout=timeout).get("max.message.bytes")
        except Exception as exc:
            log.info("topic %s: broker did not say its max.message.bytes (%s)", topic, exc)
            entry = None
        if entry is not None and entry.value is not None:
            limit = min(limit, int(entry.value))
        return limit

    def ensure_topics(self, topics: Mapping[str, tuple[int, int]], timeout: float = 10.0) -> None:
        """Create missing topics (name → (partitions, replication)); blocking, call at start."""
        admin = self.admin_client()
        new = [NewTopic(name, p, r) for name, (p, r) in topics.items()]
        for name, future in admin.create_topics(new, request_timeout=timeout).items():
            try:
                future.result(timeout=timeout)
                log.info("created Kafka topic %s", name)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise

    def queued(self) -> int:
        """Messages the producer holds that the broker has not confirmed yet (held back
        by partition or in librdkafka)."""
        current = self._current
        if current is None or current.producer is None:
            return 0
        return len(current.producer) + sum(len(lane.held) for lane in current.holding)

    def flush(self, timeout: float) -> int:
        """Blocking: wait for outstanding deliveries; returns how many are still queued."""
        current = self._current
        if current is None or current.producer is None:
            return 0
        return int(current.producer.flush(timeout))

    def stop(self) -> None:
        self._stopping.set()
        if self._poller is not None:
            self._poller.join(timeout=5)
        self._hand_over_reports()  # reports served by a final flush()
        self._current = None


_Report = tuple["_Generation", "_Sends", int, "_Lane | None", "KafkaError | None", "Message"]
# librdkafka's RD_KAFKA_IDEMP_MAX_INFLIGHT: an idempotent producer creates a partition's
# next ProduceRequest only while fewer of the partition's messages are in flight.
PARTITION_WINDOW = 5
_REPLACING = KafkaError(
    KafkaError._FATAL, "Kafka producer is being replaced after a fatal error", retriable=True
)
_QUEUE_FULL = KafkaError(KafkaError._QUEUE_FULL, "local producer queue full")
_STALLED = KafkaError(KafkaError._TIMED_OUT, "no delivery confirmed for a long while")
# librdkafka's default message.max.bytes (also Apache Kafka's default limit, about 1 MB).
_LIBRDKAFKA_MESSAGE_MAX_BYTES = 1_000_000
# Errors about one message that no retry cures: the broker (or librdkafka) will never
# take it. A direct send answers 422; the spool drainer sets the record aside.
_REFUSED_FOR_GOOD = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_MSG_SIZE,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.INVALID_RECORD,
    }
)


def refused_for_good(err: KafkaError) -> bool:
    """Whether Kafka will never take this message, however often it is sent."""
    return err.code() in _REFUSED_FOR_GOOD


# Errors about the producer's identity rather than one message: every later message of
# this producer instance fails the same way, so the instance is replaced. librdkafka
# flags some as fatal; a broker that lost its producer state (restarted, replaced,
# paused past its timeouts) may answer others per message without that flag.
_PRODUCER_STATE_ERRORS = frozenset(
    {
        KafkaError._FATAL,
        KafkaError.PRODUCER_FENCED,
        KafkaError.UNKNOWN_PRODUCER_ID,
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError.INVALID_PRODUCER_ID_MAPPING,
        KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER,
    }
)


def _breaks_producer(err: KafkaError) -> bool:
    return bool(err.fatal()) or err.code() in _PRODUCER_STATE_ERRORS


@dataclass(eq=False, slots=True)
class _Generation:
    """One librdkafka producer instance and the deliveries it still owes."""

    number: int
    producer: Producer | None = None
    fatal: KafkaError | None = None
    # Sends with messages handed to this producer and not all settled (event loop only).
    pending: set[_Sends] = field(default_factory=set)
    # Per (topic, partition): its messages in librdkafka and those held back (loop only).
    lanes: dict[tuple[str, int], _Lane] = field(default_factory=dict)
    # Lanes with held messages.
    holding: set[_Lane] = field(default_factory=set)
    last_delivered: float = field(default_factory=time.monotonic)
    last_timed_out: float = 0.0

    def stalled(self, now: float, seconds: float) -> bool:
        """Messages keep timing out and none was delivered for ``seconds``."""
        return self.last_timed_out > self.last_delivered and now - self.last_delivered > seconds


_Held = tuple[str, bytes, "str | None", "Sequence[tuple[str, bytes | None]] | None", "_Sends", int]


@dataclass(eq=False, slots=True)
class _Lane:
    """One partition of one producer generation (event loop only): how many of its
    messages librdkafka has not reported yet, and those held back until fewer than
    :data:`PARTITION_WINDOW` are."""

    in_flight: int = 0
    held: deque[_Held] = field(default_factory=deque)


class _Sends:
    """The messages of one :meth:`KafkaProducer.produce_many` call and their outcomes;
    ``done`` resolves when every one is settled (event loop only)."""

    __slots__ = ("done", "left", "outcomes")

    def __init__(self, done: asyncio.Future[None], count: int) -> None:
        self.done = done
        self.left = count
        self.outcomes: list[Message | KafkaException | None] = [None] * count

    def settle(self, index: int, outcome: Message | KafkaException) -> None:
        """The first outcome of a message counts (a report after ``expire`` is late)."""
        if self.outcomes[index] is None:
            self.outcomes[index] = outcome
            self.left -= 1
            if self.left == 0 and not self.done.done():
                self.done.set_result(None)

    def fail_unsettled(self, error: KafkaException) -> None:
        for index, outcome in enumerate(self.outcomes):
            if outcome is None:
                self.settle(index, error)

    def expire(self, seconds: float) -> None:
        timed_out = KafkaError(KafkaError._TIMED_OUT, f"not confirmed within {seconds} s")
        self.fail_unsettled(KafkaException(timed_out))


def _fail_pending(generation: _Generation) -> None:
    """Fail, as retriable, deliveries a replaced producer never reported."""
    for sends in generation.pending:
        sends.fail_unsettled(KafkaException(_REPLACING))
    generation.pending.clear()
    for lane in generation.holding:
        lane.held.clear()
    generation.holding.clear()
