"""``lineage-proxy dlq list|show|redrive``: read a dead-letter topic and re-send from it.

A dead letter (:mod:`consumers.dead_letter`) is the source message — key, value,
headers — plus ``dlq_*`` headers: why (``dlq_reason``), which consumer gave up on it,
where it came from (topic, partition, offset) and, for an HTTP target, the status and an
excerpt of its answer. A record is named ``PARTITION:OFFSET`` in the dead-letter topic.

Reading never joins a consumer group and never commits: the tools can run beside the
daemons and leave no trace. Re-driving only reads the dead-letter topic too — nothing is
ever deleted from it — and sends each chosen event through :func:`replay_target`, as
``replay`` does: to a topic (keyed as the proxy keys events) or to a consumer's target
with that consumer's retry policy. The ids of the records re-driven are printed, so an
operator can note what was done; re-driving twice sends twice.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO, cast

import orjson
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from consumers.config import ConsumerConfig
from consumers.replay import ReplayResult, replay_target, send_one
from proxy.kafka.client_logs import kafka_client_config
from proxy.kafka.settings import KafkaConfig, connection_settings
from proxy.support.yaml_source import ConfigError

__all__ = [
    "DeadLetter",
    "Selection",
    "SelectionError",
    "parse_record_id",
    "read_dead_letters",
    "reader_settings",
    "redrive",
    "source_topic_of",
]

# How long to wait for the broker when reading (metadata, watermarks, fetches).
_READ_TIMEOUT = 10.0


class SelectionError(ValueError):
    """The records asked for are not there, or not said unambiguously (exit 2)."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    partition: int
    offset: int
    timestamp: datetime | None  # when it was dead-lettered (the record's time)
    key: str | None
    value: bytes
    headers: Mapping[str, bytes | None]

    @property
    def id(self) -> str:
        return f"{self.partition}:{self.offset}"

    def header(self, name: str) -> str | None:
        value = self.headers.get(name)
        return value.decode("utf-8", "replace") if value is not None else None

    @property
    def reason(self) -> str | None:
        return self.header("dlq_reason")

    @property
    def consumer(self) -> str | None:
        return self.header("dlq_consumer")

    @property
    def source_topic(self) -> str | None:
        return self.header("dlq_source_topic")

    @property
    def event(self) -> dict[str, Any] | None:
        """The dead-lettered event, or None for a poison message (not a JSON object)."""
        try:
            event = orjson.loads(self.value)
        except orjson.JSONDecodeError:
            return None
        return event if isinstance(event, dict) else None

    def summary(self) -> dict[str, Any]:
        """What ``dlq list`` shows of it."""
        event = self.event or {}
        job = event.get("job") if isinstance(event.get("job"), dict) else None
        return {
            "id": self.id,
            "partition": self.partition,
            "offset": self.offset,
            "time": self.timestamp.isoformat(timespec="milliseconds") if self.timestamp else None,
            "key": self.key,
            "consumer": self.consumer,
            "reason": self.reason,
            "http_status": self.header("dlq_http_status"),
            "event_type": event.get("eventType"),
            "job": f"{job.get('namespace')}/{job.get('name')}" if job else None,
        }

    def as_json(self) -> dict[str, Any]:
        """What ``dlq show`` prints: everything, the event parsed when it is JSON."""
        event = self.event
        return {
            **self.summary(),
            "source": {
                "topic": self.source_topic,
                "partition": _int(self.header("dlq_source_partition")),
                "offset": _int(self.header("dlq_source_offset")),
            },
            "headers": {name: self.header(name) for name in self.headers},
            "event": event,
            **({} if event is not None else {"value": self.value.decode("utf-8", "replace")}),
        }

    def as_text(self) -> str:
        s = self.summary()
        what = " ".join(str(v) for v in (s["event_type"], s["job"]) if v) or "(not an event)"
        return (
            f"{s['id']:>8}  {s['time'] or '-':<32}  {s['consumer'] or '-':<16}  "
            f"{what}  key={s['key'] or '-'}  reason: {s['reason'] or '-'}"
        )


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.lstrip("-").isdigit() else None


def parse_record_id(text: str) -> tuple[int | None, int]:
    """``PARTITION:OFFSET``, or a bare ``OFFSET`` (partition None: any partition)."""
    partition, _, offset = text.rpartition(":")
    try:
        return (int(partition) if partition else None), int(offset)
    except ValueError:
        raise SelectionError(f"{text!r}: a record is PARTITION:OFFSET or OFFSET") from None


@dataclass(frozen=True, slots=True)
class Selection:
    """Which dead letters: named ones, or those the filters keep (all of them: no filter)."""

    ids: tuple[str, ...] = ()
    consumer: str | None = None
    since: datetime | None = None
    reason: str | None = None
    limit: int | None = None

    @property
    def filters(self) -> bool:
        return any(v is not None for v in (self.consumer, self.since, self.reason))

    def keeps(self, record: DeadLetter) -> bool:
        if self.consumer is not None and record.consumer != self.consumer:
            return False
        if self.since is not None and (record.timestamp is None or record.timestamp < self.since):
            return False
        return self.reason is None or self.reason.lower() in (record.reason or "").lower()

    def pick(self, records: list[DeadLetter]) -> list[DeadLetter]:
        """The selected records, in the order they were dead-lettered; SelectionError
        if a named one is missing or a bare offset names several."""
        chosen = [r for r in records if self.keeps(r)]
        if self.ids:
            chosen = [self._find(chosen, text) for text in self.ids]
        return chosen[: self.limit] if self.limit is not None else chosen

    @staticmethod
    def _find(records: list[DeadLetter], text: str) -> DeadLetter:
        partition, offset = parse_record_id(text)
        found = [
            r
            for r in records
            if r.offset == offset and (partition is None or r.partition == partition)
        ]
        if not found:
            raise SelectionError(f"no dead letter {text} (that the filters keep)")
        if len(found) > 1:
            ids = ", ".join(r.id for r in found)
            raise SelectionError(f"offset {text} is in several partitions ({ids}): give one")
        return found[0]


def reader_settings(kafka: KafkaConfig) -> dict[str, Any]:
    """librdkafka settings of the reader: the cluster's connection and security settings
    (``kafka.producer``, as every client of the cluster takes them), and a reader that
    leaves no trace."""
    return {
        **connection_settings(kafka.bootstrap_servers, kafka.producer),
        # Assigned partitions only: the group is never joined, nothing is committed.
        "group.id": "lineage-proxy.dlq-tools",
        "enable.auto.commit": False,
        "allow.auto.create.topics": False,
        # The end of a partition is where a fetch says it is: a watermark asked for
        # separately may be older than what a fetch from the start returns.
        "enable.partition.eof": True,
    }


def read_dead_letters(kafka: KafkaConfig, topic: str) -> list[DeadLetter]:
    """Blocking: every record of ``topic`` up to each partition's end when it is reached,
    ordered by time (then partition, offset). ConfigError if there is no such topic."""
    consumer = Consumer(kafka_client_config(reader_settings(kafka)))
    try:
        partitions = _partitions(consumer, topic)
        records = list(_read_to_the_end(consumer, topic, partitions))
    finally:
        consumer.close()
    records.sort(key=lambda r: (r.timestamp or datetime.min.replace(tzinfo=UTC), r.id))
    return records


def _partitions(consumer: Consumer, topic: str) -> list[int]:
    try:
        metadata = consumer.list_topics(topic, timeout=_READ_TIMEOUT).topics.get(topic)
    except KafkaException as exc:
        raise ConfigError(f"{topic}: Kafka did not answer: {exc}") from None
    if metadata is None or metadata.error is not None or not metadata.partitions:
        raise ConfigError(f"no dead-letter topic {topic} on the cluster")
    return sorted(metadata.partitions)


def _read_to_the_end(consumer: Consumer, topic: str, partitions: list[int]) -> Iterator[DeadLetter]:
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    pending = set(partitions)
    deadline = time.monotonic() + _READ_TIMEOUT
    while pending:
        message = consumer.poll(0.5)
        if message is None:
            if time.monotonic() > deadline:
                raise ConfigError(f"{topic}: Kafka stopped answering before the end")
            continue
        deadline = time.monotonic() + _READ_TIMEOUT
        error = message.error()
        if error is None:
            yield _dead_letter(message)
        elif error.code() == KafkaError._PARTITION_EOF:
            pending.discard(message.partition() or 0)
        else:
            raise ConfigError(f"{topic}: {error.str()}")


def _dead_letter(message: Message) -> DeadLetter:
    kind, millis = message.timestamp()
    key = message.key()
    headers = cast("list[tuple[str, bytes | None]]", message.headers() or [])
    return DeadLetter(
        partition=message.partition() or 0,
        offset=message.offset() or 0,
        timestamp=datetime.fromtimestamp(millis / 1000, UTC) if kind and millis > 0 else None,
        key=key.decode("utf-8", "replace") if key is not None else None,
        value=message.value() or b"",
        headers=dict(headers),
    )


def source_topic_of(records: Iterable[DeadLetter]) -> str:
    """The one topic the records were dead-lettered from (the default re-drive target)."""
    topics = {r.source_topic for r in records}
    if len(topics) != 1 or None in topics:
        named = ", ".join(sorted(t or "(none)" for t in topics)) or "none"
        raise SelectionError(
            f"the records come from several topics or none ({named}): give --to-topic"
        )
    return cast("str", topics.pop())


async def redrive(
    records: list[DeadLetter],
    consumers: Mapping[str, ConsumerConfig],
    kafka: KafkaConfig,
    to: str,
    *,
    to_topic: bool,
    create_topic: bool = False,
    out: TextIO | None = None,
    progress: TextIO | None = None,
    progress_every: float = 5.0,
    max_attempts: int = 5,
) -> ReplayResult:
    """Send ``records`` one by one, in order, to topic or consumer ``to``; print
    ``redriven ID`` for each one taken and ``failed ID: why`` for each not taken (to
    ``out``, default stdout), and every ``progress_every`` seconds how far it got (to
    ``progress``, default stderr). ``create_topic``: a missing topic ``to`` is created
    (else it is a ConfigError that says to give ``--create-topic``).

    A consumer's target is tried ``max_attempts`` times per record (not forever, as its
    daemon would); when it stays unreachable the redrive stops there, says so, and
    prints ``not tried ID`` for each record after it: run it again once the target is
    back (records printed ``redriven`` were sent; sending them again sends twice)."""
    out = out or sys.stdout
    progress = progress or sys.stderr
    result = ReplayResult()
    last = time.monotonic()
    async with replay_target(
        consumers,
        kafka,
        to,
        to_topic=to_topic,
        create_topic=create_topic,
        max_attempts=None if to_topic else max_attempts,
    ) as destination:
        for done, record in enumerate(records, 1):
            event = record.event
            if event is None:
                result.unreadable += 1
                print(
                    f"failed {record.id}: not a JSON object; fix it and produce it yourself",
                    file=out,
                )
            elif await send_one(destination, event, record.value, result):
                print(f"redriven {record.id}", file=out)
            elif not to_topic and result.last_failure_retriable:
                print(
                    f"failed {record.id}: {to} unreachable after {max_attempts} attempts; stopping",
                    file=out,
                )
                for untried in records[done:]:
                    print(f"not tried {untried.id}", file=out)
                result.untried = len(records) - done
                out.flush()
                break
            else:
                print(f"failed {record.id}: {to} did not take it (see the log)", file=out)
            out.flush()
            if time.monotonic() - last >= progress_every:
                last = time.monotonic()
                print(f"redrive: {done}/{len(records)} done, {result.sent} sent", file=progress)
    return result
