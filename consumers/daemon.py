"""One consumer daemon: poll → deliver → commit, at least once, in order per run key.

Messages arrive from :class:`~consumers.kafka_source.KafkaSource` and are queued in
*lanes*: one per (partition, message key), so events of one run (one key) are delivered
one after another in offset order while different runs and partitions proceed
concurrently (at most ``concurrency`` deliveries at once). In batch mode (a target that
takes JSON arrays) a lane is a stripe of a partition's keys (a key always falls in the
same stripe) and takes up to ``batch_events`` at once: arrays mix runs, and the stripes of
all assigned partitions together fill ``concurrency`` (more would only make arrays
smaller). A partition's stripe count is fixed while it is assigned, so a key never moves
to another lane.

Each message ends exactly one way — delivered, skipped as a duplicate, or dead-lettered —
and only then is its offset done; a dead letter the DLQ does not take yet is tried again
until it does (its lane waits, see consumers/dead_letter.py), never dropped. For a target
whose result depends on arrival order (Marquez; ``ordering: acknowledged``) there are no
lanes: one scheduler takes events in the order the proxy acknowledged them, merged across
partitions, and starts each once no earlier event in flight names the same run, job,
dataset or new namespace (:mod:`consumers.ordered`). Only a message the target refuses (or
that is not a JSON object) is dead-lettered: a retriable failure blocks its lane, retried
with capped backoff and paced by the circuit breaker, until the target takes the event — or
until it failed ``dead_letter.attempts_while_target_up`` times while the target took other
events (proxy/destinations/failing_event.py), then it is refused. The committed offset of a
partition is the lowest offset not yet done (:class:`~consumers.offsets.OffsetTracker`),
committed as soon as a delivery moved it (at most every ``commit_interval_seconds``), when
partitions are revoked, and at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Message, TopicPartition

from consumers.config import ConsumerConfig
from consumers.copies import CopyFilter
from consumers.dead_letter import DeadLetterTopic
from consumers.dedupe import DedupeCache, event_identity
from consumers.kafka_source import KafkaSource, Partition, consumer_settings
from consumers.metrics import ConsumerMetrics
from consumers.offsets import OffsetTracker
from consumers.ordered import ConflictGate, Lookahead, ReorderBuffer
from consumers.poison import checked_event, parse_event
from proxy.destinations.base import DeliveryError
from proxy.destinations.hops import carrying, hops_from_kafka
from proxy.destinations.registry import DestinationResources, build_destination
from proxy.destinations.retry import CircuitBreaker, CircuitState, RetryingDestination
from proxy.kafka.client_logs import failure_reason
from proxy.kafka.producer import KafkaProducer
from proxy.kafka.settings import KafkaConfig, SpoolConfig, producer_settings
from proxy.support.logs import CONSUMER, DESTINATION
from proxy.support.throttled_log import ThrottledLog

__all__ = ["ConsumerDaemon"]

log = logging.getLogger(__name__)

# How long closing waits for a republishing producer's queued messages.
_CLOSE_FLUSH_SECONDS = 10.0

# (topic, partition, message key) — or, in batch mode, (topic, partition, stripe of keys).
LaneKey = tuple[str, int, bytes | int | None]


# Deliveries a lane makes in a row once it holds one of the `concurrency` slots.
_TURNS_PER_SLOT = 8
# Questions to the brokers of where the merged partitions end are at least this far apart.
_ASK_WATERMARKS_EVERY = 0.05


@dataclass
class _Lane:
    queue: deque[Message] = field(default_factory=deque)
    task: asyncio.Task[None] | None = None


class ConsumerDaemon:
    def __init__(
        self,
        name: str,
        config: ConsumerConfig,
        *,
        bootstrap_servers: str,
        default_topic: str,
        create_topics: bool = True,
        topic_partitions: int = 3,
        cluster_settings: Mapping[str, Any] | None = None,
    ) -> None:
        """``cluster_settings``: ``kafka.producer`` of config.yaml; its security settings
        reach every client the daemon makes (consumer, dead letters, republishing)."""
        self.name = name
        self.config = config
        self.topics = config.topics or [default_topic]
        self.group_id = config.group_id or f"lineage-proxy.{name}"
        self.metrics = ConsumerMetrics(name)
        self.breaker = CircuitBreaker(config.circuit_breaker)
        # What lineage_consumer_circuit_open says now: set on change, not per delivery.
        self._circuit_shown_open = False
        self._last_failure = ""  # the target's last retriable failure, for /healthz
        self._dead_letter_log = ThrottledLog(log)
        # What the target's destination shares (a republishing producer): the cluster read
        # from, no spool (an event is not committed before the target has it) and no topic
        # creation (the target topic is the operator's).
        self._resources = DestinationResources(
            KafkaConfig(
                bootstrap_servers=bootstrap_servers,
                producer=dict(cluster_settings or {}),
                create_topics=False,
                spool=SpoolConfig(enabled=False),
            ),
            archive_root=Path.cwd(),  # a consumer's archive directory is absolute by now
        )
        self.destination: RetryingDestination | None = None
        self._batch = max(1, getattr(config.target, "batch_max_events", 1))
        self._create_topics = create_topics
        self._topic_partitions = topic_partitions
        self._dlq_producer = KafkaProducer(producer_settings(bootstrap_servers, cluster_settings))
        self.dead_letter = DeadLetterTopic(
            self._dlq_producer,
            config.dead_letter.topic,
            name,
            on_failure=self.metrics.dead_letter_write_failures.inc,
        )
        self.dedupe = (
            DedupeCache(config.dedupe.max_entries, config.dedupe.journal)
            if config.dedupe.enabled
            else None
        )
        group = config.group
        self.source = KafkaSource(
            consumer_settings(
                bootstrap_servers,
                self.group_id,
                session_timeout_ms=group.session_timeout_ms,
                heartbeat_interval_ms=group.heartbeat_interval_ms,
                max_poll_interval_ms=group.max_poll_interval_ms,
                auto_offset_reset=group.auto_offset_reset,
                overrides=group.settings,
                cluster_settings=cluster_settings,
            ),
            self.topics,
            handler=self,
            max_buffered=config.max_buffered,
            max_buffered_bytes=config.max_buffered_bytes,
            # revoke cancels deliveries still running after shutdown_timeout_seconds;
            # the margin lets them unwind before the thread stops waiting.
            revoke_timeout=config.shutdown_timeout_seconds + 5,
            positions=config.delivery_order() == "acknowledged",
        )
        self._reads_event = True
        self._slots = asyncio.Semaphore(config.concurrency)
        self._lanes: dict[LaneKey, _Lane] = {}
        # Acknowledgement order (ordering: acknowledged): the merge across partitions, what
        # the deliveries in flight name, and those deliveries with their partitions.
        # A partition with a backlog is waited for while half the fetch bounds are free.
        self._reorder: ReorderBuffer | None = (
            ReorderBuffer(
                config.reorder_window_seconds,
                full_records=config.max_buffered // 2,
                full_bytes=config.max_buffered_bytes // 2,
            )
            if config.delivery_order() == "acknowledged"
            else None
        )
        self._gate = ConflictGate()
        self._ahead = Lookahead(4 * config.concurrency)
        # Copies of a record already delivered (a spool batch committed twice): skipped.
        self._copies = CopyFilter()
        self._ordered: dict[asyncio.Task[None], Partition] = {}
        self._scheduler: asyncio.Task[None] | None = None
        # The question to the brokers of where the merged partitions end, while one is
        # out, and when the last was asked (see _ask_watermarks).
        self._asking: asyncio.Task[None] | None = None
        self._asked_at = float("-inf")
        self._wake = asyncio.Event()
        # Set when a delivery may have moved a commit point (see _commit_as_delivered).
        self._moved = asyncio.Event()
        self._trackers: dict[Partition, OffsetTracker] = {}
        self._stripes: dict[Partition, int] = {}  # batch mode: lanes per partition
        self._highs: dict[Partition, int] = {}
        # Messages (and value bytes) the source handed over that the lanes no longer hold:
        # the source's side of the buffering bound (see consumers/kafka_source.py).
        self.released_messages = 0
        self.released_bytes = 0
        self._stopping = False
        self._unassigned_since: float | None = time.monotonic()
        self.metrics.assigned_partitions.set_function(lambda: len(self._trackers))
        self.metrics.dead_letters_waiting.set_function(lambda: self.dead_letter.waiting)
        self.metrics.kafka_unreachable.set_function(
            lambda: self.source.unreachable_since is not None
        )

    # ---- lifetime ----

    async def run(self, stop: asyncio.Event) -> None:
        """Start, consume until ``stop`` is set, then drain, commit and leave the group."""
        # Every log line of this task and of what it starts (lanes, commits, the Kafka
        # thread) names the consumer and its target.
        CONSUMER.set(self.name)
        DESTINATION.set(self.config.target.kind)
        await self._start()
        committer = asyncio.create_task(self._commit_as_delivered())
        try:
            await stop.wait()
        finally:
            committer.cancel()
            await self._shutdown()

    async def open_destination(self) -> None:
        """Build and start the target's destination (once); a credential whose
        environment variable is missing raises ValueError here."""
        if self.destination is None:
            destination = await build_destination(
                self.name,
                self.config.destination(),
                self._resources,
                breaker=self.breaker,
                on_retry=self._retried,
            )
            # A consumer's target always has a retry policy (ConsumerConfig sets it).
            assert isinstance(destination, RetryingDestination)
            # An event the target fails while it takes others is dead-lettered at last.
            destination.failing_bound = self.config.dead_letter.attempts_while_target_up
            self.destination = destination
            # Dedupe needs the event's identity; else only a destination that reads the
            # event needs the message parsed into a dict.
            self._reads_event = self.dedupe is not None or destination.reads_event

    def _opened(self) -> RetryingDestination:
        assert self.destination is not None, "open_destination() first"
        return self.destination

    async def close_destination(self) -> None:
        if self.destination is not None:
            await self.destination.close()
            self.destination = None
        await self._resources.close(_CLOSE_FLUSH_SECONDS)

    async def _start(self) -> None:
        self._dlq_producer.start()
        if self.dedupe is not None:
            await self.dedupe.open()
        await self.open_destination()
        self._unassigned_since = time.monotonic()
        self.source.start()
        log.info(
            "consumer %s: %s → %s (group %s)",
            self.name,
            ",".join(self.topics),
            self.config.target.kind,
            self.group_id,
        )
        # After the source started, so that /healthz reports an unreachable broker at once;
        # a dead letter produced before its topic exists waits in the producer.
        if self._create_topics and self.config.dead_letter.enabled:
            topics = {
                self.dead_letter.topic_for(t): (self._topic_partitions, 1) for t in self.topics
            }
            try:
                await asyncio.to_thread(self._dlq_producer.ensure_topics, topics, 5.0)
            except Exception as exc:  # the broker may come later; DLQ produce retries
                log.warning("could not ensure dead-letter topics: %s", failure_reason(exc))

    async def _shutdown(self) -> None:
        log.info("consumer %s: stopping; finishing in-flight deliveries", self.name)
        self._stopping = True
        self.source.stop_fetching()
        for lane in self._lanes.values():
            self._drop_queued(lane)
        if self._reorder is not None:
            self._release(self._reorder.drop_all())
            self._release(self._ahead.drop_all())
        await self._finish([lane.task for lane in self._lanes.values() if lane.task is not None])
        await self._finish(list(self._ordered))
        for task in (self._scheduler, self._asking):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self._commit()
        await self.source.close()
        await self.close_destination()
        await asyncio.to_thread(self._dlq_producer.flush, 10.0)
        self._dlq_producer.stop()
        if self.dedupe is not None:
            await self.dedupe.close()
        log.info("consumer %s: stopped", self.name)

    # ---- messages in (the source's SourceHandler) ----

    def _release(self, messages: Iterable[Message]) -> None:
        count = size = 0
        for message in messages:
            count += 1
            size += len(message)
        self.released_messages += count
        self.released_bytes += size

    def receive(self, messages: list[Message]) -> None:
        for message in messages:
            partition = (message.topic() or "", message.partition() or 0)
            tracker = self._trackers.get(partition)
            if tracker is None or self._stopping:
                self._release((message,))
                continue  # revoked meanwhile: its next owner reads it again
            if tracker.add(message.offset() or 0):
                # Finished by the partition's last owner past its commit point.
                self.metrics.duplicates_skipped.inc()
                self._release((message,))
                self._done(message)
                if self._reorder is not None:
                    self._reorder.skip(partition, message.offset() or 0)
                continue
            if self._reorder is not None:
                self._reorder.add(partition, message, time.monotonic())
                continue
            key = message.key()
            lane_key = (
                *partition,
                key if self._batch == 1 else hash(key) % self._stripes[partition],
            )
            lane = self._lanes.setdefault(lane_key, _Lane())
            lane.queue.append(message)
            if lane.task is None:
                lane.task = asyncio.create_task(self._drain(lane_key, lane))
        if self._reorder is not None and not self._stopping:
            self._wake.set()
            if self._scheduler is None:
                self._scheduler = asyncio.create_task(self._schedule_in_order())

    def assigned(
        self,
        partitions: list[Partition],
        done_before: Mapping[Partition, set[int]],
        positions: Mapping[Partition, tuple[int, int]],
    ) -> None:
        """``done_before``: per partition, the offsets its last owner finished past the
        committed one (its commit metadata), to skip; ``positions``: where fetching
        starts and the high watermark (for the merge in acknowledgement order)."""
        for partition in partitions:
            self._trackers[partition] = OffsetTracker(done_before.get(partition, ()))
        if self._reorder is not None:
            self._reorder.assign(partitions, positions)
        share = -(-self.config.concurrency // max(1, len(self._trackers)))  # rounded up
        for partition in partitions:
            self._stripes.setdefault(partition, share)  # never changed under queued events
        if self._trackers:
            self._unassigned_since = None

    async def revoke(self, partitions: list[Partition]) -> list[TopicPartition]:
        """Finish what is in flight for ``partitions``; return the offsets to commit."""
        lanes = [(k, lane) for k, lane in self._lanes.items() if (k[0], k[1]) in partitions]
        for _, lane in lanes:
            self._drop_queued(lane)
        if self._reorder is not None:
            self._release(self._reorder.drop(partitions))
            self._release(self._ahead.drop(partitions))
        await self._finish([lane.task for _, lane in lanes if lane.task is not None])
        await self._finish([task for task, p in self._ordered.items() if p in partitions])
        offsets = []
        for partition in partitions:
            tracker = self._trackers.pop(partition, None)
            self._stripes.pop(partition, None)
            if tracker is not None and (point := tracker.commit_point()) is not None:
                offsets.append(TopicPartition(*partition, point[0], metadata=point[1]))
            self.metrics.forget_partition(*partition)
        self._note_if_unassigned()
        return offsets

    def lost(self, partitions: list[Partition]) -> None:
        for key, lane in list(self._lanes.items()):
            if (key[0], key[1]) in partitions:
                self._drop_queued(lane)
        if self._reorder is not None:
            self._release(self._reorder.drop(partitions))
            self._release(self._ahead.drop(partitions))
        for partition in partitions:
            self._trackers.pop(partition, None)
            self._stripes.pop(partition, None)
            self.metrics.forget_partition(*partition)
        self._note_if_unassigned()

    def _note_if_unassigned(self) -> None:
        if not self._trackers and self._unassigned_since is None:
            self._unassigned_since = time.monotonic()

    async def _finish(self, tasks: list[asyncio.Task[None]]) -> None:
        """Let in-flight deliveries finish for up to ``shutdown_timeout_seconds``, then
        cancel the rest (a lane waiting for a down target waits forever): their events
        stay uncommitted and are read again by whoever owns the partition next."""
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=self.config.shutdown_timeout_seconds)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)

    def _drop_queued(self, lane: _Lane) -> None:
        self._release(lane.queue)
        lane.queue.clear()

    # ---- delivery ----

    async def _drain(self, key: LaneKey, lane: _Lane) -> None:
        try:
            while lane.queue:
                async with self._slots:
                    # A few turns per slot while the lane has more: with more lanes than
                    # slots (one lane per run key), a slot per delivery was a semaphore
                    # wait — a future and a wake-up — for every event.
                    for _ in range(_TURNS_PER_SLOT):
                        if not lane.queue:
                            break
                        batch = [
                            lane.queue.popleft() for _ in range(min(self._batch, len(lane.queue)))
                        ]
                        self._release(batch)
                        await self._handle(batch)
        finally:
            lane.task = None
            if not lane.queue and self._lanes.get(key) is lane:
                del self._lanes[key]

    async def _schedule_in_order(self) -> None:
        """Acknowledgement order: take events from the merge as the reorder buffer lets
        them go and start each once a delivery slot is free and nothing before it (in
        flight or waiting) names what it names; then wait for a new record, a finished
        delivery or the window."""
        reorder = self._reorder
        assert reorder is not None
        while True:
            now = time.monotonic()
            self._ahead.fill(reorder, self._gate, now)
            started = self._ahead.start(self._gate, self.config.concurrency - len(self._ordered))
            for waiting in started:
                message = waiting.message
                self._release((message,))
                task = asyncio.create_task(
                    self._deliver_in_order(message, waiting.event, waiting.names)
                )
                self._ordered[task] = (message.topic() or "", message.partition() or 0)
                task.add_done_callback(self._ordered.pop)
            if started:
                continue
            if reorder.wants_watermarks and self._asking is None:
                self._asking = asyncio.create_task(self._ask_watermarks(reorder))
            self._wake.clear()
            wait = None if self._ahead.full else reorder.wait_seconds(now)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    async def _ask_watermarks(self, reorder: ReorderBuffer) -> None:
        """Ask the brokers where the merged partitions end (answered through
        :meth:`watermarks`, which wakes the scheduler); at most once per
        ``_ASK_WATERMARKS_EVERY``, so that a trickle over idle partitions does not ask
        after every record. Whatever happens, the answer's time is reported: a question
        that failed leaves the window to decide, as before it was asked."""
        try:
            await asyncio.sleep(max(0.0, self._asked_at + _ASK_WATERMARKS_EVERY - time.monotonic()))
            asked_at = time.monotonic()
            try:
                highs, asked_at = await self.source.fresh_watermarks(reorder.partitions())
            except Exception as exc:  # the brokers unreachable, a client that failed
                log.debug("high watermarks not known: %s", exc)
                highs = {}
            self._asked_at = asked_at
            self.watermarks(highs, asked_at)
        finally:
            self._asking = None

    async def _deliver_in_order(
        self, message: Message, event: dict[str, Any] | None, names: frozenset[str]
    ) -> None:
        delivered = False
        try:
            await self._handle([message], [event])
            delivered = True
        finally:
            self._gate.release(names, delivered)
            self._wake.set()

    async def _handle(
        self, messages: list[Message], parsed: list[dict[str, Any] | None] | None = None
    ) -> None:
        """Deliver, skip or dead-letter each message; ``parsed``: their events, when the
        caller parsed them already (None for one that is not a JSON object)."""
        ready: list[tuple[Message, dict[str, Any]]] = []
        for index, message in enumerate(messages):
            if self._copies.is_copy(message):
                self.metrics.duplicates_skipped.inc()
                self._done(message)
                continue
            if self.dedupe is not None and self.dedupe.seen(_dead_letter_identity(message)):
                # Dead-lettered by an earlier run that crashed before committing past it.
                self.metrics.duplicates_skipped.inc()
                self._done(message)
                continue
            value = message.value() or b""
            if parsed is not None:
                event = parsed[index]
            else:
                event = parse_event(value) if self._reads_event else checked_event(value)
            if event is None:
                await self._dead_letter(message, "poison: not a JSON object", None, "poison")
            elif self.dedupe is not None and self.dedupe.seen(event_identity(event)):
                self.metrics.duplicates_skipped.inc()
                self._done(message)
            else:
                ready.append((message, event))
        if len(ready) > 1:
            try:
                await self._deliver_batch(ready)
                return
            except DeliveryError as exc:  # refused: retriable failures are retried inside
                # One bad event fails the whole array: find it by sending one by one.
                log.info("%s: batch refused (%s); delivering one by one", self.name, exc.reason)
        for message, event in ready:
            await self._deliver_one(message, event)

    async def _deliver_one(self, message: Message, event: dict[str, Any]) -> None:
        started = time.perf_counter()
        try:
            # The proxies this event passed go with it to an HTTP target (loop guard).
            with carrying(hops_from_kafka(message.headers())):
                if self._batch > 1:
                    await self._opened().deliver_batch([event], [message.value() or b""])
                else:
                    await self._opened().deliver(event, message.value() or b"")
        except DeliveryError as exc:  # refused: retriable failures are retried inside
            await self._dead_letter(message, exc.reason, exc, "refused")
            return
        self.metrics.target_seconds.observe(time.perf_counter() - started)
        if self.dedupe is None:
            self._mark_delivered(((message, event),))  # no coroutine on the usual path
        else:
            await self._delivered([(message, event)])

    async def _deliver_batch(self, ready: list[tuple[Message, dict[str, Any]]]) -> None:
        started = time.perf_counter()
        with carrying(max(hops_from_kafka(m.headers()) for m, _ in ready)):
            await self._opened().deliver_batch(
                [event for _, event in ready], [m.value() or b"" for m, _ in ready]
            )
        self.metrics.target_seconds.observe(time.perf_counter() - started)
        await self._delivered(ready)

    async def _delivered(self, ready: list[tuple[Message, dict[str, Any]]]) -> None:
        if self.dedupe is not None:
            for _, event in ready:
                # Remembered before the offset may be committed (see consumers/dedupe.py).
                await self.dedupe.add(event_identity(event))
        self._mark_delivered(ready)

    def _mark_delivered(self, ready: Iterable[tuple[Message, dict[str, Any]]]) -> None:
        count = 0
        for message, _ in ready:
            self._done(message)
            count += 1
        self.metrics.delivered.inc(count)
        if self._circuit_shown_open:
            self._circuit_shown_open = False
            self.metrics.circuit_open.set(0)

    async def _dead_letter(
        self, message: Message, reason: str, error: DeliveryError | None, why: str
    ) -> None:
        # One line per kind of failure per 10 s: a stream of bad events (or a target
        # refusing everything) must not write a line per message. Each is counted.
        self._dead_letter_log.warning(
            f"dead_letter:{why}",
            "%s: %s[%d]@%d dead-lettered: %s",
            self.name,
            message.topic(),
            message.partition(),
            message.offset(),
            reason,
        )
        if self.config.dead_letter.enabled:
            await self.dead_letter.send(message, reason, error)
        if self.dedupe is not None:
            # Journaled before the offset may be committed, like a delivery: a restart
            # after a crash does not dead-letter this message a second time. Keyed by
            # its place in the log, not the event, so a redriven copy is delivered.
            await self.dedupe.add(_dead_letter_identity(message))
        self.metrics.dead_lettered.labels(self.name, why).inc()
        self._done(message)

    def _retried(self, error: DeliveryError, attempt: int, delay: float) -> None:
        self._last_failure = error.reason
        self.metrics.retried.inc()
        self._circuit_shown_open = self.breaker.state is not CircuitState.CLOSED
        self.metrics.circuit_open.set(1 if self._circuit_shown_open else 0)
        log.info("%s: retry %d in %.2fs: %s", self.name, attempt, delay, error.reason)

    def _done(self, message: Message) -> None:
        self._copies.finished(message)
        tracker = self._trackers.get((message.topic() or "", message.partition() or 0))
        if tracker is not None:
            tracker.done(message.offset() or 0)
            self._moved.set()

    # ---- commits and lag ----

    async def _commit_as_delivered(self) -> None:
        """Commit once deliveries moved a commit point, at most every
        ``commit_interval_seconds``: commits follow delivery closely (a crash re-sends what
        was delivered since the last one), and a busy stream makes at most 1/interval commits
        a second (20 by default), not one per event. The first waits the interval from
        start."""
        while True:
            await asyncio.sleep(self.config.commit_interval_seconds)
            await self._moved.wait()
            self._moved.clear()
            try:
                await self._commit()
            except Exception as exc:  # next round tries again; revoke/shutdown commit too
                self._moved.set()
                log.warning("%s: commit failed: %s", self.name, exc)

    async def _commit(self) -> None:
        """Commit each partition's point with the offsets finished past it (metadata)."""
        points = {}
        for partition, tracker in self._trackers.items():
            point = tracker.commit_point()
            if point is not None:
                points[partition] = (tracker, point)
        if not points:
            return
        committed = await self.source.commit(
            [
                TopicPartition(t, p, point[0], metadata=point[1])
                for (t, p), (_, point) in points.items()
            ]
        )
        if committed:
            for tracker, point in points.values():
                tracker.committed_at(point)

    def watermarks(self, highs: dict[Partition, int], asked_at: float | None = None) -> None:
        self._highs.update(highs)
        if self._reorder is not None:
            self._reorder.watermarks(highs, asked_at)
            self._wake.set()
        for (topic, partition), lag in self._lags().items():
            self.metrics.set_lag(topic, partition, lag)

    def _lags(self) -> dict[Partition, int]:
        """Per partition: messages from the first unfinished one to the end (last watermark)."""
        out = {}
        for partition, tracker in self._trackers.items():
            high, position = self._highs.get(partition), tracker.position
            if high is not None and position is not None:
                out[partition] = max(0, high - position)
        return out

    def health(self) -> tuple[bool, dict[str, Any]]:
        """Healthy, and the details /healthz shows; ``problems`` says what is wrong."""
        problems = self._problems()
        return not problems, {
            "consumer": self.name,
            "status": "ok" if not problems else "unhealthy",
            "problems": problems,
            "group": self.group_id,
            "target": self.config.target.kind,
            "circuit": self.breaker.state.value,
            "assigned": sorted(f"{t}[{p}]" for t, p in self._trackers),
            "lag": {f"{t}[{p}]": lag for (t, p), lag in self._lags().items()},
            "buffered": dict(zip(("events", "bytes"), self.source.buffered(), strict=True)),
        }

    def _problems(self) -> list[str]:
        problems = []
        now = time.monotonic()
        if not self.source.started:
            problems.append("starting")
        elif not self.source.alive:
            problems.append(f"Kafka consumer thread stopped: {self.source.error!r}")
        if self.source.unreachable_since is not None:
            down = now - self.source.unreachable_since
            problems.append(f"Kafka unreachable for {down:.0f} s: {self.source.unreachable_reason}")
        session = self.config.group.session_timeout_ms / 1000
        if self._unassigned_since is not None and now - self._unassigned_since > session:
            problems.append(
                f"no partitions assigned for {now - self._unassigned_since:.0f} s "
                f"(session timeout {session:g} s)"
            )
        if self.breaker.state is not CircuitState.CLOSED:
            problems.append(
                f"circuit {self.breaker.state.value}: the target fails ({self._last_failure}); "
                f"deliveries wait, next probe in {self.breaker.seconds_to_probe():.1f} s"
            )
        if (dead_letters := self.dead_letter.problem()) is not None:
            problems.append(dead_letters)
        return problems


def _dead_letter_identity(message: Message) -> str:
    """The dedupe identity of a dead-lettered message: its topic, partition and offset."""
    return f"dead-letter:{message.topic()}:{message.partition()}:{message.offset()}"
