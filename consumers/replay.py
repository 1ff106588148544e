"""``lineage-proxy replay``: re-send archived events in event-time order.

Reads the archive's finished files (``dt=YYYY-MM-DD/namespace=…/``, JSON Lines, gzip or
not — the layout of :mod:`proxy.destinations.archive`), keeps the events inside
``--since``/``--until``/``--namespace``, and sends them oldest first to a configured
consumer's target (e.g. backfilling a fresh Marquez) or to a Kafka topic. One day is
loaded and sorted at a time: an archive day is the UTC date of ``eventTime``, so days in
order and events sorted within a day give the global order with one day in memory.

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
import gzip
import logging
import sys
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, TextIO

import orjson
from confluent_kafka import KafkaException

from consumers.config import ConsumerConfig
from proxy.destinations.archive import escape_partition_value, finished_files
from proxy.destinations.base import DeliveryError, Destination
from proxy.destinations.config import KafkaConfig, KafkaDestinationConfig, SpoolConfig
from proxy.destinations.registry import DestinationResources, build_destination
from proxy.destinations.retry import CircuitBreaker
from proxy.openlineage import subject_name
from proxy.openlineage.rejected import rejected_event
from proxy.yaml_source import ConfigError

__all__ = ["ReplayFilter", "ReplayResult", "archived_days", "parse_time", "replay"]

log = logging.getLogger(__name__)

# Where documents without a namespace are filed, rejected envelopes among them: the
# namespace filter looks inside them.
_NO_NAMESPACE = f"namespace={escape_partition_value('')}"
# Topic deliveries awaited together: enough to keep the producer's batches full.
_TOPIC_WINDOW = 1000
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


def _days(archive: Path, keep: ReplayFilter) -> dict[date, list[Path]]:
    """Finished files by archive day, pruned by day and namespace partition."""
    wanted_namespace = (
        f"namespace={escape_partition_value(keep.namespace)}" if keep.namespace else None
    )
    days: dict[date, list[Path]] = {}
    for path in finished_files(archive):
        day_dir, namespace_dir = path.parent.parent.name, path.parent.name
        try:
            day = date.fromisoformat(day_dir.removeprefix("dt="))
        except ValueError:
            continue
        if wanted_namespace is not None and namespace_dir not in (wanted_namespace, _NO_NAMESPACE):
            continue
        if keep.keeps_day(day):
            days.setdefault(day, []).append(path)
    return dict(sorted(days.items()))


Entry = tuple[datetime, bytes, dict[str, Any]]


def _read_day(paths: list[Path], keep: ReplayFilter, result: ReplayResult) -> list[Entry]:
    """Blocking: the kept events of one day, sorted by event time (stable)."""
    events = []
    for path in paths:
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            data = gzip.decompress(data)
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                event = orjson.loads(line)
                when = parse_time(event["eventTime"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                result.unreadable += 1
                continue
            refused = rejected_event(event)
            if refused is not None:
                # An envelope from the rejected route: send the event as it was sent,
                # in the order it was refused.
                if not isinstance(refused, dict):
                    result.unreadable += 1
                    continue
                event, line = refused, orjson.dumps(refused)
            if keep.keeps(event, when):
                events.append((when, line, event))
    events.sort(key=lambda item: item[0])
    return events


async def archived_days(
    archive: Path, keep: ReplayFilter, result: ReplayResult
) -> AsyncIterator[tuple[date, list[Entry]]]:
    """Per archive day, oldest first: the day's kept events in event-time order."""
    days = await asyncio.to_thread(_days, archive, keep)
    for day, paths in days.items():
        yield day, await asyncio.to_thread(_read_day, paths, keep, result)


class _Progress:
    """One self-overwriting line on a terminal; nothing when stderr is not one."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream if stream is not None and stream.isatty() else None
        self._last = 0.0

    def show(self, day: date, result: ReplayResult, *, force: bool = False) -> None:
        now = time.monotonic()
        if self.stream is None or (not force and now - self._last < 0.2):
            return
        self._last = now
        self.stream.write(
            f"\rreplay: {day.isoformat()}  sent {result.sent}  failed {result.failed}  "
        )
        self.stream.flush()

    def done(self) -> None:
        if self.stream is not None:
            self.stream.write("\n")


async def replay(
    consumers: Mapping[str, ConsumerConfig],
    kafka: KafkaConfig,
    archive: Path,
    to: str,
    keep: ReplayFilter,
    progress_stream: TextIO | None = sys.stderr,
    *,
    to_topic: bool = False,
    create_topic: bool = False,
) -> ReplayResult:
    """Send the archived events to consumer ``to``'s target, or with ``to_topic`` to
    topic ``to`` of the ``kafka`` cluster. Nothing is guessed from a name: an unknown
    consumer is a ConfigError, and so is a missing topic unless ``create_topic`` (a typo
    must not become a new topic full of events)."""
    result = ReplayResult()
    progress = _Progress(progress_stream)
    if not to_topic and to not in consumers:
        known = ", ".join(sorted(consumers)) or "none configured"
        raise ConfigError(f"--to-consumer {to}: no such consumer (configured: {known})")
    if to_topic and kafka.bootstrap_servers == "embedded":
        raise ConfigError(
            f"--to-topic {to}: needs a real Kafka cluster (kafka.bootstrap_servers is 'embedded')"
        )
    # A replayed event is only counted once its destination has it: no spool.
    resources = DestinationResources(
        kafka.model_copy(
            update={"spool": SpoolConfig(enabled=False), "create_topics": create_topic}
        ),
        archive_root=Path.cwd(),
    )
    try:
        if to_topic and not create_topic:
            await _require_topic(resources, to)
        destination = await build_destination(
            to,
            KafkaDestinationConfig(kind="kafka", topic=to)
            if to_topic
            else consumers[to].destination(),
            resources,
            breaker=None if to_topic else CircuitBreaker(consumers[to].circuit_breaker),
            on_retry=lambda error, attempt, delay: log.info(
                "retry %d in %.1fs: %s", attempt, delay, error.reason
            ),
        )
    except BaseException:
        await resources.close(0.0)
        raise
    try:
        async for day, entries in archived_days(archive, keep, result):
            if not to_topic:
                for _, payload, event in entries:
                    await _send_one(destination, event, payload, result)
                    progress.show(day, result)
            else:
                for start in range(0, len(entries), _TOPIC_WINDOW):
                    window = entries[start : start + _TOPIC_WINDOW]
                    await asyncio.gather(
                        *(_send_one(destination, e, p, result) for _, p, e in window)
                    )
                    progress.show(day, result)
            progress.show(day, result, force=True)
    finally:
        progress.done()
        await destination.close()
        await resources.close(_FLUSH_SECONDS)
    return result


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


async def _send_one(
    destination: Destination, event: dict[str, Any], payload: bytes, result: ReplayResult
) -> None:
    try:
        await destination.deliver(event, payload)
    except DeliveryError as exc:
        result.failed += 1
        subject = subject_name(event)
        log.warning(
            "not replayed (%s) %s at %s: %s",
            "Kafka failed" if exc.retriable else "refused",
            "/".join(subject) if subject else "?",
            event.get("eventTime"),
            exc.reason,
        )
    else:
        result.sent += 1
