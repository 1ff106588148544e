"""``lineage-proxy replay``: re-send archived events in event-time order.

Reads the archive's files (``dt=YYYY-MM-DD/namespace=…/``, JSON Lines, gzip or not — the
layout of :mod:`proxy.destinations.archive.destination`) from a directory — those still
being written (``_*.inprogress``, the latest events) included up to their last whole line —
or from an object store (``s3://bucket/prefix``, see :mod:`consumers.archive_objects`),
keeps the events inside ``--since``/``--until``/``--namespace``, and sends them oldest first
to a configured consumer's target (e.g. backfilling a fresh Marquez) or to a Kafka topic.
One day is sorted at a time: an archive day is the UTC date of ``eventTime``, so days in
order and events sorted within a day give the global order. A day is sorted by
:mod:`consumers.sorted_day` in bounded memory (sorted runs spilled to temporary files, then
merged), so a day of any size replays without being held.

Envelopes of refused events (the ``rejected`` route's ``rejected/`` directory) are
unwrapped: the event inside is sent as it was sent, in the order of refusal, so a fix
(a repair switched on, a schema registered) can be applied by replaying them through
the proxy (a consumer whose target is the proxy's ``/api/v1/lineage``).

Targets get events one at a time, in order, with the consumer's retry policy (a target
that is down is waited for); an event a target refuses is reported and skipped. A topic
gets them keyed like the proxy keys them, produced in order (per partition order holds
with the idempotent producer).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, TextIO

import orjson
from confluent_kafka import KafkaException

from consumers.archive_objects import download_day, object_days, store_client
from consumers.config import ConsumerConfig
from consumers.sorted_day import LineReader, SortedDay, sort_day
from proxy.destinations.archive.destination import (
    escape_partition_value,
    finished_files,
    in_progress_files,
    is_finished_file,
)
from proxy.destinations.base import DeliveryError, Destination
from proxy.destinations.kafka.config import KafkaDestinationConfig
from proxy.destinations.kinds import DestinationConfig
from proxy.destinations.object_archive.destination import split_archive_url
from proxy.destinations.registry import DestinationResources, build_destination
from proxy.destinations.retry import CircuitBreaker
from proxy.kafka.settings import KafkaConfig, SpoolConfig
from proxy.openlineage import subject_name
from proxy.openlineage.rejected import rejected_event
from proxy.support.yaml_source import ConfigError

__all__ = [
    "ReplayFilter",
    "ReplayResult",
    "archived_days",
    "parse_time",
    "replay",
    "replay_target",
    "send_one",
]

log = logging.getLogger(__name__)

# Where documents without a namespace are filed, rejected envelopes among them: the
# namespace filter looks inside them.
_NO_NAMESPACE = f"namespace={escape_partition_value('')}"
# Topic deliveries awaited together: enough to keep the producer's batches full.
_TOPIC_WINDOW = 1000
# Sorted events read off the event loop at a time.
_READ_WINDOW = 1000
# How long the end of a replay waits for Kafka to confirm what is still queued.
_FLUSH_SECONDS = 30.0


def parse_time(text: str) -> datetime:
    """An RFC 3339 date-time or a plain date (midnight UTC); naive times are UTC."""
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class ReplayFilter:
    since: datetime | None = None  # inclusive
    until: datetime | None = None  # exclusive
    namespace: str | None = None

    def keeps_day(self, day: date) -> bool:
        if self.since is not None and day < self.since.astimezone(UTC).date():
            return False
        return not (self.until is not None and day > self.until.astimezone(UTC).date())

    def keeps(self, event: dict[str, Any], when: datetime) -> bool:
        if self.since is not None and when < self.since:
            return False
        if self.until is not None and when >= self.until:
            return False
        if self.namespace is not None:
            subject = subject_name(event)
            return subject is not None and subject[0] == self.namespace
        return True


@dataclass(slots=True)
class ReplayResult:
    sent: int = 0
    failed: int = 0
    unreadable: int = 0
    # Whether the last failure was retriable (the target unreachable), not a refusal.
    last_failure_retriable: bool = False
    # Records a redrive did not try after its target stayed unreachable.
    untried: int = 0
    # Files read while still being written (``_*.inprogress``): the replay took their
    # whole lines as of the moment it read them.
    in_progress_files: int = 0


def _kept_day(keep: ReplayFilter) -> Callable[[str, str], date | None]:
    """The archive day of a file in ``day_dir/namespace_dir``, or None when ``keep``
    leaves it out (by day or namespace partition); for directories and buckets alike."""
    wanted_namespace = (
        f"namespace={escape_partition_value(keep.namespace)}" if keep.namespace else None
    )

    def kept(day_dir: str, namespace_dir: str) -> date | None:
        try:
            day = date.fromisoformat(day_dir.removeprefix("dt="))
        except ValueError:
            return None
        if wanted_namespace is not None and namespace_dir not in (wanted_namespace, _NO_NAMESPACE):
            return None
        return day if keep.keeps_day(day) else None

    return kept


def _days(archive: Path, keep: ReplayFilter, result: ReplayResult) -> dict[date, list[Path]]:
    """Archive files by day (finished ones, then those still being written), pruned by
    day and namespace partition; files in progress are counted in ``result``."""
    kept = _kept_day(keep)
    days: dict[date, list[Path]] = {}
    for path in [*finished_files(archive), *in_progress_files(archive)]:
        day = kept(path.parent.parent.name, path.parent.name)
        if day is not None:
            days.setdefault(day, []).append(path)
            if not is_finished_file(path):
                result.in_progress_files += 1
    return dict(sorted(days.items()))


def _line_reader(keep: ReplayFilter, result: ReplayResult) -> LineReader:
    """What one archived line becomes: its event time and the bytes to send, or None
    (unreadable, counted; or left out by ``keep``)."""

    def read(line: bytes) -> tuple[datetime, bytes] | None:
        if not line.strip():
            return None
        try:
            event = orjson.loads(line)
            when = parse_time(event["eventTime"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            result.unreadable += 1
            return None
        refused = rejected_event(event)
        if refused is not None:
            # An envelope from the rejected route: send the event as it was sent, in
            # the order it was refused.
            if not isinstance(refused, dict):
                result.unreadable += 1
                return None
            event, line = refused, orjson.dumps(refused)
        return (when, line) if keep.keeps(event, when) else None

    return read


async def archived_days(
    archive: Path | str,
    keep: ReplayFilter,
    result: ReplayResult,
    consumers: Mapping[str, ConsumerConfig] | None = None,
) -> AsyncIterator[tuple[date, SortedDay, float]]:
    """Per archive day, oldest first: the day's kept events in event-time order (sorted
    in bounded memory, closed once the next day is asked for), and the share of the
    archive's bytes (of the days kept) the day holds, for an ETA.

    ``archive`` is a directory or an ``s3://``/``s3a://`` URL (read with the settings of
    the ``consumers`` writing to that bucket, see :mod:`consumers.archive_objects`)."""
    remote = split_archive_url(str(archive))
    if remote is not None:
        async for item in _object_days(remote, keep, result, consumers or {}):
            yield item
        return
    days = await asyncio.to_thread(_days, Path(archive), keep, result)
    sizes = {day: sum(path.stat().st_size for path in paths) for day, paths in days.items()}
    total = sum(sizes.values()) or 1
    read = _line_reader(keep, result)
    for day, paths in days.items():
        entries = await asyncio.to_thread(sort_day, paths, read)
        try:
            yield day, entries, sizes[day] / total
        finally:
            entries.close()


async def _object_days(
    remote: tuple[str, str],
    keep: ReplayFilter,
    result: ReplayResult,
    consumers: Mapping[str, ConsumerConfig],
) -> AsyncIterator[tuple[date, SortedDay, float]]:
    """:func:`archived_days` of a bucket: each day fetched into a temporary directory."""
    bucket, prefix = remote
    client = await asyncio.to_thread(store_client, bucket, consumers)
    days = await asyncio.to_thread(object_days, client, bucket, prefix, _kept_day(keep))
    sizes = {day: sum(size for _, size in objects) for day, objects in days.items()}
    total = sum(sizes.values()) or 1
    read = _line_reader(keep, result)
    for day, objects in days.items():
        with tempfile.TemporaryDirectory(prefix="lineage-replay-") as scratch:
            paths = await asyncio.to_thread(download_day, client, bucket, objects, Path(scratch))
            entries = await asyncio.to_thread(sort_day, paths, read)
            try:
                yield day, entries, sizes[day] / total
            finally:
                entries.close()


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


class _Progress:
    """Where a replay is. On a terminal: one self-overwriting line, five times a second.
    Otherwise (a log file, a pipe, a CI job) one line every ``every`` seconds, so that a
    long replay is seen to move: events done, rate, and an ETA from the share of the
    archive's bytes behind us."""

    def __init__(self, stream: TextIO | None, every: float) -> None:
        self.stream = stream
        self.terminal = stream is not None and stream.isatty()
        self.every = 0.2 if self.terminal else every
        self._started = time.monotonic()
        self._last = self._started

    def show(self, day: date, result: ReplayResult, done: float, *, force: bool = False) -> None:
        """``done``: the share of the replay behind us, 0 to 1."""
        now = time.monotonic()
        if self.stream is None or not (now - self._last >= self.every or (force and self.terminal)):
            return
        self._last = now
        elapsed = max(now - self._started, 1e-6)
        count = result.sent + result.failed
        line = (
            f"replay: {day.isoformat()}  sent {result.sent}  failed {result.failed}  "
            f"{count / elapsed:.0f}/s"
        )
        if 0 < done < 1 - 1e-9:  # the shares' float sum may end a hair under 1
            line += f"  ETA {_duration(elapsed * (1 - done) / done)}"
        self.stream.write(f"\r{line}  " if self.terminal else f"{line}\n")
        self.stream.flush()

    def done(self) -> None:
        if self.stream is not None and self.terminal:
            self.stream.write("\n")


async def replay(
    consumers: Mapping[str, ConsumerConfig],
    kafka: KafkaConfig,
    archive: Path | str,
    to: str,
    keep: ReplayFilter,
    progress_stream: TextIO | None = sys.stderr,
    *,
    to_topic: bool = False,
    create_topic: bool = False,
    progress_every: float = 10.0,
) -> ReplayResult:
    """Send the archived events to consumer ``to``'s target, or with ``to_topic`` to
    topic ``to`` of the ``kafka`` cluster (see :func:`replay_target`)."""
    result = ReplayResult()
    progress = _Progress(progress_stream, progress_every)
    async with replay_target(
        consumers, kafka, to, to_topic=to_topic, create_topic=create_topic
    ) as destination:
        try:
            behind = 0.0  # share of the archive's bytes of the days done
            step = _TOPIC_WINDOW if to_topic else 1
            async for day, entries, share in archived_days(archive, keep, result, consumers):
                events, done = entries.events(), 0
                # Read a window at a time off the loop (spilled runs are files).
                while window := await asyncio.to_thread(
                    list, itertools.islice(events, _READ_WINDOW)
                ):
                    for start in range(0, len(window), step):
                        batch = window[start : start + step]
                        await asyncio.gather(
                            *(send_one(destination, e, p, result) for p, e in batch)
                        )
                        done += len(batch)
                        progress.show(day, result, behind + share * done / entries.count)
                behind += share
                progress.show(day, result, behind, force=True)
        finally:
            progress.done()
    return result


@contextlib.asynccontextmanager
async def replay_target(
    consumers: Mapping[str, ConsumerConfig],
    kafka: KafkaConfig,
    to: str,
    *,
    to_topic: bool = False,
    create_topic: bool = False,
    max_attempts: int | None = None,
) -> AsyncIterator[Destination]:
    """The destination that re-sent events go to: consumer ``to``'s target (with its
    retry policy and circuit breaker), or with ``to_topic`` topic ``to`` of the ``kafka``
    cluster, keyed as the proxy keys events. Nothing is guessed from a name: an unknown
    consumer is a ConfigError, and so is a missing topic unless ``create_topic`` (a typo
    must not become a new topic full of events). Closed (Kafka flushed) on exit.

    ``max_attempts`` bounds the consumer target's retries (a daemon retries forever; an
    operator's one-off command must end): then there is no circuit breaker either, and
    a retriable failure is given up after that many attempts."""
    if not to_topic and to not in consumers:
        known = ", ".join(sorted(consumers)) or "none configured"
        raise ConfigError(f"--to-consumer {to}: no such consumer (configured: {known})")
    if to_topic and kafka.bootstrap_servers == "embedded":
        raise ConfigError(
            f"--to-topic {to}: needs a real Kafka cluster (kafka.bootstrap_servers is 'embedded')"
        )
    # A re-sent event is only counted once its destination has it: no spool.
    resources = DestinationResources(
        kafka.model_copy(
            update={"spool": SpoolConfig(enabled=False), "create_topics": create_topic}
        ),
        archive_root=Path.cwd(),
    )
    try:
        if to_topic and not create_topic:
            await _require_topic(resources, to)
        bounded = max_attempts is not None
        destination = await build_destination(
            to,
            KafkaDestinationConfig(kind="kafka", topic=to)
            if to_topic
            else _with_attempts(consumers[to].destination(), max_attempts),
            resources,
            breaker=None if to_topic or bounded else CircuitBreaker(consumers[to].circuit_breaker),
            on_retry=lambda error, attempt, delay: log.info(
                "retry %d in %.1fs: %s", attempt, delay, error.reason
            ),
        )
    except BaseException:
        await resources.close(0.0)
        raise
    try:
        yield destination
    finally:
        await destination.close()
        await resources.close(_FLUSH_SECONDS)


def _with_attempts(config: DestinationConfig, max_attempts: int | None) -> DestinationConfig:
    """``config`` with its retry policy giving up after ``max_attempts`` (None: as is)."""
    if max_attempts is None:
        return config
    retry = config.retry_policy()
    if retry is None:
        return config
    return config.with_retry_policy(retry.model_copy(update={"max_attempts": max_attempts}))


async def _require_topic(resources: DestinationResources, topic: str) -> None:
    """ConfigError unless the cluster has ``topic``."""
    producer = resources.producer({})
    try:
        exists = await asyncio.to_thread(producer.has_topic, topic)
    except KafkaException as exc:
        raise ConfigError(f"--to-topic {topic}: Kafka did not answer: {exc}") from None
    if not exists:
        raise ConfigError(
            f"--to-topic {topic}: no such topic on {resources.kafka.bootstrap_servers}; "
            "give --create-topic to create it"
        )


async def send_one(
    destination: Destination, event: dict[str, Any], payload: bytes, result: ReplayResult
) -> bool:
    """Deliver one event, counted in ``result``; False (logged) if it was not taken."""
    try:
        await destination.deliver(event, payload)
    except DeliveryError as exc:
        result.failed += 1
        result.last_failure_retriable = exc.retriable
        subject = subject_name(event)
        log.warning(
            "not re-sent (%s) %s at %s: %s",
            "Kafka failed" if exc.retriable else "refused",
            "/".join(subject) if subject else "?",
            event.get("eventTime"),
            exc.reason,
        )
        return False
    result.sent += 1
    return True
