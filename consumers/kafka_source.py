"""The daemon's Kafka side: one librdkafka consumer on its own thread, fed to asyncio.

librdkafka's consumer blocks, so every call on it (consume, commit, pause, close) runs
on one thread — the loop never blocks and the consumer is never used from two threads.
Fetched messages are handed to the loop with ``call_soon_threadsafe``; commits are
requested from the loop through a queue and answered with a future.

Rebalances: when partitions are revoked (or the consumer closes), the callback runs on
this thread, asks the loop to finish the in-flight deliveries of those partitions, and
commits what they completed before the partitions move to another member.

Memory is bounded at both ends of the hand-over. librdkafka's own prefetch is capped by
:data:`PREFETCH_SETTINGS` (its defaults would queue up to 64 MiB plus a 50 MiB fetch).
On our side, the messages handed to the loop and not yet taken for delivery (or dropped)
are counted here (handed, on this thread) minus there (released, on the loop): each
counter has one writer, so no lock. A poll asks for no more messages than the room left
under ``max_buffered`` and ``max_buffered_bytes``; when either is reached fetching waits,
and if the loop stays full for a second the partitions pause (the consumer keeps polling,
so it stays in the group) until the loop is down to half.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import queue
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from consumers.offsets import decode_done
from proxy.kafka.client_logs import cluster_log, kafka_client_config
from proxy.kafka.settings import connection_settings, resolve_env_settings

__all__ = ["PREFETCH_SETTINGS", "KafkaSource", "SourceHandler", "consumer_settings"]

log = logging.getLogger(__name__)

Partition = tuple[str, int]

# auto.offset.reset values that start a partition without a commit at its beginning.
_EARLIEST = frozenset({"earliest", "smallest", "beginning"})

# librdkafka's prefetch for our consumers (``group.settings`` may override them): at most
# 8 MiB queued ahead per consumer, fetched 8 MiB at a time, and no more than 2,000
# messages per partition — instead of 64 MiB + 50 MiB and 100,000 per partition. Once its
# queue was full (while the loop is full, this thread stops taking messages), librdkafka
# waits fetch.queue.backoff.ms before fetching again: 1 s by default, which left the loop
# with nothing to deliver for half a second at a time; 20 ms instead.
PREFETCH_SETTINGS: dict[str, int] = {
    "queued.max.messages.kbytes": 8 * 1024,
    "queued.min.messages": 2_000,
    "fetch.max.bytes": 8 * 1024 * 1024,
    "fetch.queue.backoff.ms": 20,
}
# How long fetching waits with the loop full before pausing the partitions (a pause throws
# librdkafka's read-ahead away; fetching it again takes a few hundred ms), and how often it
# looks for room meanwhile. Rebalance callbacks wait at most this long.
_PAUSE_AFTER = 1.0
_FULL_WAIT = 0.005
# How long the brokers have to say where their partitions end (fresh_watermarks).
_LIST_OFFSETS_TIMEOUT = 2.0
_LATEST = OffsetSpec.latest()  # type: ignore[no-untyped-call]  # (confluent-kafka has no hints here)
# Assumed size of a message before any was seen, to size the first poll under the byte
# bound: Kafka's default largest message.
_FIRST_SIZE_GUESS = 1024 * 1024


class SourceHandler(Protocol):
    """What the source reports to (the daemon). Every method runs on the event loop,
    except the ``released_*`` counters, which the consumer thread reads (ints, read
    atomically)."""

    @property
    def released_messages(self) -> int:
        """Messages handed over that the handler no longer holds in its queues (taken for
        delivery, or dropped): with :attr:`released_bytes`, what the bound counts."""
        ...

    @property
    def released_bytes(self) -> int:
        """The value bytes of :attr:`released_messages`."""
        ...

    def receive(self, messages: list[Message]) -> None: ...

    def assigned(
        self,
        partitions: list[Partition],
        done_before: Mapping[Partition, set[int]],
        positions: Mapping[Partition, tuple[int, int]],
    ) -> None:
        """``done_before``: offsets finished past each partition's committed one, as its
        last owner's commit metadata says (consumers/offsets.py). ``positions``: where
        asked for (``KafkaSource(positions=True)``) and known, the offset fetching starts
        at and the high watermark."""
        ...

    async def revoke(self, partitions: list[Partition]) -> list[TopicPartition]:
        """Finish the partitions' in-flight deliveries; the offsets to commit before they
        move to another member."""
        ...

    def lost(self, partitions: list[Partition]) -> None: ...

    def watermarks(self, highs: dict[Partition, int], asked_at: float | None = None) -> None:
        """High watermarks: as last fetched (every few seconds), or as the brokers
        answered when asked at ``asked_at`` (:meth:`KafkaSource.fresh_watermarks`)."""
        ...


def consumer_settings(
    bootstrap_servers: str,
    group_id: str,
    *,
    session_timeout_ms: int,
    heartbeat_interval_ms: int,
    max_poll_interval_ms: int,
    auto_offset_reset: str,
    overrides: dict[str, Any],
    cluster_settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """librdkafka settings: the cluster's connection and security settings (from
    ``kafka.producer``), ours, then ``overrides``; offsets are ours to commit, after the
    target took the event."""
    return {
        **connection_settings(bootstrap_servers, {**(cluster_settings or {}), **overrides}),
        "group.id": group_id,
        "session.timeout.ms": session_timeout_ms,
        "heartbeat.interval.ms": heartbeat_interval_ms,
        "max.poll.interval.ms": max_poll_interval_ms,
        "auto.offset.reset": auto_offset_reset,
        **PREFETCH_SETTINGS,
        # A topic subscribed to before it exists (the in-process consumer starts before the
        # proxy creates its topic) is only seen at the next metadata refresh: librdkafka's
        # default of 5 minutes would hold the quick start's first events that long.
        "topic.metadata.refresh.interval.ms": 10_000,
        **resolve_env_settings(overrides),
        # Not overridable: auto-commit would commit events the target never got.
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
    }


class KafkaSource:
    def __init__(
        self,
        settings: dict[str, Any],
        topics: list[str],
        *,
        handler: SourceHandler,
        max_buffered: int,
        max_buffered_bytes: int,
        revoke_timeout: float,
        poll_batch: int = 500,
        positions: bool = False,
    ) -> None:
        self.settings = settings
        self._want_positions = positions
        self.topics = topics
        self._handler = handler
        self._max_buffered = max_buffered
        self._max_buffered_bytes = max_buffered_bytes
        # Written on the consumer thread only (the handler writes the released side).
        self._handed = 0
        self._handed_bytes = 0
        self._largest = 0  # largest message value seen, to size polls under the byte bound
        self.peak_buffered = (0, 0)  # highest (messages, bytes) held right after a hand-over
        self._revoke_timeout = revoke_timeout
        self._poll_batch = poll_batch
        self._commands: queue.Queue[_CommitRequest] = queue.Queue()
        # Bumped on this thread at every revoke/loss: a commit asked for before a rebalance
        # must not land after it (it could move back the offset of a partition that is
        # someone else's by now).
        self._generation = 0
        self._fetching = threading.Event()
        self._admin: AdminClient | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.error: BaseException | None = None
        # Since when (monotonic) no broker answers, and librdkafka's words for it; written
        # on the consumer thread, read by /healthz (single assignments, atomic).
        self.unreachable_since: float | None = None
        self.unreachable_reason = ""

    @property
    def started(self) -> bool:
        return self._thread is not None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = self._loop.create_future()
        self._fetching.set()
        # The thread runs in a copy of the starter's context: its log lines (and the
        # callbacks it hands to the loop) keep the daemon's log context fields.
        self._thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(self._run,),
            name="kafka-consume",
            daemon=True,
        )
        self._thread.start()

    def buffered(self) -> tuple[int, int]:
        """Messages (and their bytes) handed to the loop that it still holds in its queues,
        including those on their way to it. Callable from any thread."""
        return (
            self._handed - self._handler.released_messages,
            self._handed_bytes - self._handler.released_bytes,
        )

    async def fresh_watermarks(
        self, partitions: Sequence[Partition]
    ) -> tuple[dict[Partition, int], float]:
        """Where ``partitions`` end as their leaders say now (the high watermarks), and
        when they were asked (``time.monotonic()``); a partition whose leader does not
        answer within a few seconds is left out.

        Asked by a client of its own: a broker answers a connection's requests in order,
        so on the consumer's connections the question would wait behind a fetch that
        waits up to ``fetch.wait.max.ms`` for data (seen: 1.7 s for six partitions).
        """
        asked_at = time.monotonic()
        if not partitions:
            return {}, asked_at
        if self._admin is None:
            bootstrap = str(self.settings.get("bootstrap.servers", ""))
            self._admin = AdminClient(
                kafka_client_config(connection_settings(bootstrap, self.settings))
            )
        futures = self._admin.list_offsets(
            {TopicPartition(topic, index): _LATEST for topic, index in partitions},
            request_timeout=_LIST_OFFSETS_TIMEOUT,
        )
        answers = await asyncio.gather(
            *(asyncio.wrap_future(future) for future in futures.values()), return_exceptions=True
        )
        highs = {
            (tp.topic, tp.partition): answer.offset
            for tp, answer in zip(futures, answers, strict=True)
            if not isinstance(answer, BaseException) and answer.offset >= 0
        }
        return highs, asked_at

    def stop_fetching(self) -> None:
        """Fetch no more messages (commits and rebalances are still served)."""
        self._fetching.clear()

    async def commit(self, offsets: list[TopicPartition]) -> bool:
        """Commit ``offsets`` (next offset to read per partition) synchronously; False if
        a rebalance came first and the request was dropped (the offsets may not be ours)."""
        assert self._loop is not None
        done: asyncio.Future[bool] = self._loop.create_future()
        self._commands.put(_CommitRequest(offsets, self._generation, done))
        return await done

    async def close(self) -> None:
        """Leave the group (revoking, hence committing, what is assigned) and end the thread."""
        assert self._stopped is not None
        self._stopping.set()
        await self._stopped

    # ---- everything below runs on the consumer thread ----

    def _run(self) -> None:
        assert self._loop is not None and self._stopped is not None
        consumer: Consumer | None = None
        try:
            consumer = Consumer(kafka_client_config(self.settings, self._kafka_error))
            consumer.subscribe(
                self.topics, on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost
            )
            next_watermarks = 0.0
            paused = False
            full_since: float | None = None
            while not self._stopping.is_set():
                self._serve_commits(consumer)
                room = self._room(paused)
                now = time.monotonic()
                full_since = (full_since or now) if room == 0 else None
                # Full for a moment (the loop frees room within milliseconds), fetching
                # just waits: librdkafka keeps its bounded read-ahead. Full for longer (a
                # slow or down target), the partitions pause — the consumer keeps polling
                # (rebalances) but fetches nothing — until the loop is down to half.
                hold = not self._fetching.is_set() or (
                    full_since is not None and (paused or now - full_since >= _PAUSE_AFTER)
                )
                if hold != paused:
                    (consumer.pause if hold else consumer.resume)(consumer.assignment())
                    paused = hold
                if room == 0 and not paused:
                    time.sleep(_FULL_WAIT)
                    continue
                # What librdkafka has queued, without waiting; when nothing is, wait for
                # the first message only (a batch with a timeout would wait the whole
                # timeout for a batch that is not full, with deliveries starved meanwhile).
                messages = consumer.consume(room, 0) if room else []
                if not messages:
                    messages = consumer.consume(1, 0.1)
                good = [m for m in messages if not self._is_error(m)]
                if good:
                    self._hand_over(good)
                if time.monotonic() >= next_watermarks:
                    next_watermarks = time.monotonic() + 2.0
                    self._report_watermarks(consumer)
                    if self.unreachable_since is not None:
                        self._check_reachable(consumer)
            self._serve_commits(consumer)
            consumer.close()  # revokes the assignment → _revoked commits it
            consumer = None
        except BaseException as exc:  # the daemon reports a dead source on /healthz
            log.exception("Kafka consumer thread failed")
            self.error = exc
        finally:
            if consumer is not None:
                consumer.close()
            self._fail_pending_commits()
            self._loop.call_soon_threadsafe(_resolve, self._stopped, None)

    def _room(self, paused: bool) -> int:
        """How many messages the next poll may take: what fits under ``max_buffered`` and
        ``max_buffered_bytes`` (sized by the largest message seen), none when nothing fits.
        Once paused, none until the loop is down to half of both, so that the prefetch a
        pause throws away is not thrown away on every poll."""
        messages, size = self.buffered()
        if paused:
            messages, size = messages * 2, size * 2
        room = min(
            self._poll_batch,
            self._max_buffered - messages,
            (self._max_buffered_bytes - size) // (self._largest or _FIRST_SIZE_GUESS),
        )
        if room <= 0 and messages == 0:
            return 1  # one message larger than the byte bound still goes, alone
        return max(room, 0)

    def _hand_over(self, messages: list[Message]) -> None:
        assert self._loop is not None
        size = 0
        for message in messages:
            length = len(message)
            size += length
            if length > self._largest:
                self._largest = length
        self._handed += len(messages)
        self._handed_bytes += size
        held = self.buffered()
        if held[1] > self.peak_buffered[1] or held[0] > self.peak_buffered[0]:
            self.peak_buffered = (
                max(held[0], self.peak_buffered[0]),
                max(held[1], self.peak_buffered[1]),
            )
        self._loop.call_soon_threadsafe(self._handler.receive, messages)

    def _is_error(self, message: Message) -> bool:
        err = message.error()
        if err is None:
            return False
        if err.code() != KafkaError._PARTITION_EOF:
            # Throttled: a broker that is gone can make every consume() return one.
            cluster_log(self.settings["bootstrap.servers"]).error(err)
        return True

    def _kafka_error(self, error: KafkaError) -> None:
        # Logged already, throttled, by the cluster's log (proxy/kafka/client_logs.py): here only
        # what /healthz reports.
        if error.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._AUTHENTICATION):
            if self.unreachable_since is None:
                self.unreachable_since = time.monotonic()
            refused = cluster_log(self.settings["bootstrap.servers"]).refused_credentials()
            self.unreachable_reason = refused or error.str() or error.name()

    def _check_reachable(self, consumer: Consumer) -> None:
        """Clear the "unreachable" mark once a broker answers a metadata request
        (librdkafka reports brokers going down, not coming back)."""
        try:
            consumer.list_topics(self.topics[0], timeout=1.0)
        except KafkaException:
            return
        self.unreachable_since = None

    def _queued_commits(self) -> Iterator[_CommitRequest]:
        while True:
            try:
                yield self._commands.get_nowait()
            except queue.Empty:
                return

    def _serve_commits(self, consumer: Consumer) -> None:
        assert self._loop is not None
        for request in self._queued_commits():
            if request.generation != self._generation:
                self._loop.call_soon_threadsafe(_resolve, request.done, None, False)
                continue
            owned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
            offsets = [tp for tp in request.offsets if (tp.topic, tp.partition) in owned]
            error: BaseException | None = None
            try:
                _commit(consumer, offsets)
            except KafkaException as exc:
                error = exc
            self._loop.call_soon_threadsafe(_resolve, request.done, error, True)

    def _fail_pending_commits(self) -> None:
        assert self._loop is not None
        closed = RuntimeError("consumer closed")
        for request in self._queued_commits():
            self._loop.call_soon_threadsafe(_resolve, request.done, closed, False)

    def _report_watermarks(self, consumer: Consumer) -> None:
        assert self._loop is not None
        highs: dict[Partition, int] = {}
        for tp in consumer.assignment():
            try:
                _, high = consumer.get_watermark_offsets(tp, cached=True)
            except KafkaException:
                continue
            if high >= 0:
                highs[(tp.topic, tp.partition)] = high
        self._loop.call_soon_threadsafe(self._handler.watermarks, highs)

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        assert self._loop is not None
        log.info("assigned %s", _names(partitions))
        committed = _committed(consumer, partitions)
        self._loop.call_soon_threadsafe(
            self._handler.assigned,
            [(tp.topic, tp.partition) for tp in partitions],
            {
                (tp.topic, tp.partition): decode_done(tp.offset, tp.metadata)
                for tp in committed
                if tp.offset >= 0
            },
            self._positions(consumer, partitions, committed) if self._want_positions else {},
        )

    def _positions(
        self,
        consumer: Consumer,
        partitions: list[TopicPartition],
        committed: list[TopicPartition],
    ) -> dict[Partition, tuple[int, int]]:
        """Per partition, the offset fetching starts at and the high watermark now, where
        the brokers answer within a second (an order-sensitive merge waits for a partition
        with a backlog; see consumers/ordered.py)."""
        start_at = {(tp.topic, tp.partition): tp.offset for tp in committed if tp.offset >= 0}
        earliest = str(self.settings.get("auto.offset.reset", "")) in _EARLIEST
        out = {}
        for tp in partitions:
            try:
                low, high = consumer.get_watermark_offsets(tp, timeout=1.0, cached=False)
            except KafkaException:
                break  # the brokers do not answer now: the merge falls back on its window
            partition = (tp.topic, tp.partition)
            out[partition] = (start_at.get(partition, low if earliest else high), high)
        return out

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        assert self._loop is not None
        self._generation += 1
        log.info("revoked %s: finishing in-flight deliveries, committing", _names(partitions))
        handed = asyncio.run_coroutine_threadsafe(
            self._handler.revoke([(tp.topic, tp.partition) for tp in partitions]), self._loop
        )
        try:
            offsets = handed.result(timeout=self._revoke_timeout)
        except FutureTimeout:
            handed.cancel()
            log.warning("revoke: deliveries did not finish in %.0fs", self._revoke_timeout)
            return
        try:
            _commit(consumer, offsets)
        except KafkaException as exc:
            log.warning("commit on revoke failed: %s", exc)

    def _lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        assert self._loop is not None
        self._generation += 1
        # Lost (e.g. session timed out): another member may own them already; no commit.
        log.warning("lost %s", _names(partitions))
        self._loop.call_soon_threadsafe(
            self._handler.lost, [(tp.topic, tp.partition) for tp in partitions]
        )


def _committed(consumer: Consumer, partitions: list[TopicPartition]) -> list[TopicPartition]:
    """The committed offsets, with what the last owners finished past them (their commit
    metadata); nothing when the group coordinator cannot say now (those events are
    delivered again)."""
    if not partitions:
        return []
    try:
        return list(consumer.committed(partitions, timeout=5.0))
    except KafkaException as exc:
        log.warning("could not read the committed offsets' metadata: %s", exc)
        return []


def _commit(consumer: Consumer, offsets: list[TopicPartition]) -> None:
    if not offsets:
        return
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError._NO_OFFSET:  # nothing new: harmless
            raise


def _resolve(done: asyncio.Future[Any], error: BaseException | None, result: Any = None) -> None:
    if done.done():
        return
    if error is None:
        done.set_result(result)
    else:
        done.set_exception(error)


@dataclass(frozen=True, slots=True)
class _CommitRequest:
    offsets: list[TopicPartition]
    generation: int
    done: asyncio.Future[bool]


def _names(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions) or "nothing"
