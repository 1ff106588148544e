"""Kafka through an outage: spool what the broker cannot confirm, drain it in order later.

One :class:`KafkaSpool` per Kafka cluster the proxy writes to: a :class:`Spool` on local
disk plus a drainer task that forwards spooled messages with the same topic, key and
headers as a direct send, oldest first — so per key, in the order they were accepted —
and lets the spool delete a segment once Kafka confirmed every record in it. A spool
left by an earlier run is drained at start (which directory is whose:
:mod:`proxy.destinations.kafka.spool_dirs`).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from proxy.destinations.kafka.spool import DEAD_LETTER_FILE, Headers, Spool, SpooledRecord
from proxy.destinations.kafka.spool_dirs import record_cluster
from proxy.kafka.producer import KafkaProducer, refused_for_good
from proxy.support.throttled_log import ThrottledLog

__all__ = ["KafkaSpool", "SpoolMetrics", "SpoolRoots", "spool_roots"]

log = logging.getLogger(__name__)

# Records sent per drain round; small enough to stay far below librdkafka's local queue.
_DRAIN_BATCH = 500
_MAX_BACKOFF = 5.0
# A drain that has not moved for this long while Kafka confirms other messages is wedged:
# held keys get 503 and /readyz says so.
_WEDGED_SECONDS = 30.0


@dataclass(frozen=True)
class SpoolRoots:
    """Where one proxy process spools (``own``), and the spools no live process owns that
    it drains too (``orphans``); each root holds one directory per cluster
    (:mod:`proxy.destinations.kafka.spool_dirs`)."""

    own: Path
    orphans: tuple[Path, ...] = ()


_WORKER_DIR = re.compile(r"worker-(\d+)")


def spool_roots(directory: Path, worker: int | None = None, workers: int = 1) -> SpoolRoots:
    """The spool roots of a single proxy process (``worker=None``) or of worker
    ``worker`` of ``workers``, under ``kafka.spool.directory``.

    Worker ``i`` spools under ``directory/worker-i``; a restarted worker ``i`` finds its
    predecessor's spool there. Spools that no worker of this run owns — those of a run
    with more workers, or of a single-process run (``directory`` itself), or, for a single
    process, those of an earlier multi-worker run — are drained by the single process or
    by worker 0, so nothing acknowledged stays on disk when the worker count changes.
    """
    found = sorted(
        (int(match.group(1)), path)
        for path in (directory.iterdir() if directory.is_dir() else ())
        if (match := _WORKER_DIR.fullmatch(path.name)) and path.is_dir()
    )
    if worker is None:
        return SpoolRoots(directory, tuple(path for _, path in found))
    own = directory / f"worker-{worker}"
    if worker != 0:
        return SpoolRoots(own)
    return SpoolRoots(own, (directory, *(path for index, path in found if index >= workers)))


class KafkaSpool:
    """A spool and its drainer for one producer (one cluster)."""

    def __init__(
        self,
        spool: Spool,
        producer: KafkaProducer,
        *,
        before_send: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.spool = spool
        self._producer = producer
        # Called with each topic before a drain round: creates a topic the broker did
        # not have when the proxy started (it may have been down then).
        self._before_send = before_send
        self._drainer: asyncio.Task[None] | None = None
        self.spooled_total = 0
        self.drained_total = 0
        # Records Kafka refused for good and the drain set aside (this run).
        self.dead_lettered_total = 0
        # Since when the drain has failed to move on, and why (None while it moves).
        self._stuck_since: float | None = None
        self._stuck_reason = ""
        self._log = ThrottledLog(log)

    @property
    def label(self) -> str:
        """The spool's name in metrics: its last two path parts (root or worker folder and
        cluster), never the absolute path."""
        return "/".join(self.spool.directory.parts[-2:])

    async def start(self) -> None:
        await self.spool.open()
        # Which cluster these events are for: a spool left on disk is forwarded there
        # (or named, if this proxy no longer writes to that cluster).
        servers = str(self._producer.settings["bootstrap.servers"])
        await asyncio.to_thread(record_cluster, self.spool.directory, servers)
        self._drainer = asyncio.create_task(self._drain_forever(), name="spool-drainer")

    async def close(self) -> None:
        """Stop draining (what is left stays on disk for the next start) and close files."""
        if self._drainer is not None:
            self._drainer.cancel()
            await asyncio.gather(self._drainer, return_exceptions=True)
        await self.spool.close()
        if self.spool.events:
            log.warning(
                "%d events stay in spool %s; they are sent to Kafka at the next start",
                self.spool.events,
                self.spool.directory,
            )

    def holds(self, topic: str, key: str | None) -> bool:
        return self.spool.holds(topic, key)

    async def store(self, topic: str, key: str | None, headers: Headers, value: bytes) -> None:
        """Append and fsync; raises ``SpoolFull`` or ``OSError`` (nothing stored)."""
        if self.spool.events == 0:
            log.warning(
                "Kafka is not confirming events: spooling them to %s until it does",
                self.spool.directory,
            )
        await self.spool.append(topic, key, headers, value)
        self.spooled_total += 1

    @property
    def accepting(self) -> bool:
        """Whether the spool takes the next event (see :meth:`refusing_reason`)."""
        return self.refusing_reason() is None

    def refusing_reason(self) -> str | None:
        """Why events for this spool get 503 now, or None: the spool itself refuses
        (writer stopped, disk stalled or failing, next event would not fit), or its drain
        is wedged although Kafka confirms other messages."""
        reason = self.spool.refusing_reason()
        if reason is not None:
            return reason
        stuck = self._stuck_since
        if (
            stuck is not None
            and self._producer.delivering
            and time.monotonic() - stuck > _WEDGED_SECONDS
        ):
            return f"spool drain makes no progress: {self._stuck_reason}"
        return None

    async def recheck(self) -> None:
        """Let a spool whose last write failed probe its disk again (for readiness)."""
        await self.spool.recheck()

    def status(self) -> dict[str, Any]:
        return {
            # Which spool: destinations of one cluster share it (the page shows it once).
            "directory": str(self.spool.directory),
            "spooling": self.spool.events > 0,
            "events": self.spool.events,
            "bytes": self.spool.bytes,
            "oldest_age_seconds": round(self.spool.oldest_age, 3),
            "refusing": self.refusing_reason(),
            "dead_letters": self.spool.dead_letters,
            "dead_letter_file": f"{self.label}/{DEAD_LETTER_FILE}",
        }

    async def _drain_forever(self) -> None:
        backoff = 0.5
        while True:
            try:
                records = await self._next_records()
                refused = await self._send_in_order(records)
                await self.spool.confirm(records)
                self.drained_total += len(records) - refused
                self._stuck_since = None
                backoff = 0.5
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # A bug or a disk error: say so, wait, and go on — never die silently.
                self._stuck(repr(exc))
                if self._log.error("drainer", "spool drainer failed: %r; trying again", exc):
                    log.debug("spool drainer failure", exc_info=True)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)

    def _stuck(self, reason: str) -> None:
        self._stuck_since = self._stuck_since or time.monotonic()
        self._stuck_reason = reason

    async def _next_records(self) -> list[SpooledRecord]:
        while True:
            self.spool.changed.clear()
            records = await self.spool.read(_DRAIN_BATCH)
            if records:
                return records
            await self.spool.changed.wait()

    async def _send_in_order(self, records: list[SpooledRecord]) -> int:
        """Produce every record (tasks are created, so produce() is called, in spool
        order; librdkafka keeps that order per partition) until each is confirmed or
        refused for good — those are set aside in the dead-letter file, so that one
        record Kafka never takes cannot stop the drain. Returns how many were set aside."""
        remaining = records
        backoff = 0.5
        set_aside = 0
        while remaining:
            if self._before_send is not None:
                for topic in dict.fromkeys(r.topic for r in remaining):
                    await self._before_send(topic)
            results = await asyncio.gather(
                *(self._producer.produce(r.topic, r.value, r.key, r.headers) for r in remaining),
                return_exceptions=True,
            )
            refused = [
                (r, _error_of(result))
                for r, result in zip(remaining, results, strict=True)
                if _refused(result)
            ]
            if refused:
                await self._set_aside(refused)
                set_aside += len(refused)
            failed = [
                r
                for r, result in zip(remaining, results, strict=True)
                if isinstance(result, BaseException) and not _refused(result)
            ]
            if failed:
                reason = next(str(r) for r in results if isinstance(r, BaseException))
                self._stuck(reason)
                self._log.warning(
                    "drain",
                    "spool drain: Kafka did not confirm %d of %d events (%s); retrying",
                    len(failed),
                    len(remaining),
                    reason,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
            remaining = failed
        return set_aside

    async def _set_aside(self, refused: list[tuple[SpooledRecord, str]]) -> None:
        """Write records Kafka refused for good to the dead-letter file (retrying while
        the disk refuses: they must not be lost), counted and logged one by one."""
        backoff = 0.5
        for record, reason in refused:
            while True:
                try:
                    await self.spool.set_aside([record], reason)
                    break
                except OSError as exc:
                    self._stuck(f"dead-letter file not written: {exc}")
                    self._log.error("dead-letter", "spool dead-letter write failed: %s", exc)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, _MAX_BACKOFF)
            self.dead_lettered_total += 1
            log.error(
                "spool: Kafka refuses a spooled event for good (%s): topic %s, key %.200r, "
                "%d bytes; set aside in %s so the drain goes on — see docs/operate/spool.md",
                reason,
                record.topic,
                record.key,
                len(record.value),
                f"{self.label}/{DEAD_LETTER_FILE}",
            )


def _refused(result: object) -> bool:
    """Kafka will never take this record (a KafkaException refused for good)."""
    return (
        isinstance(result, KafkaException)
        and isinstance(result.args[0], KafkaError)
        and refused_for_good(result.args[0])
    )


def _error_of(result: object) -> str:
    assert isinstance(result, KafkaException)
    error: KafkaError = result.args[0]
    return error.str()


class SpoolMetrics(Collector):
    """Spool depth, age and flow for /metrics, read from the live spools on scrape."""

    def __init__(self, spools: Any) -> None:
        # A callable returning the current KafkaSpool list (they come and go with rules).
        self._spools = spools

    def collect(self) -> Iterator[Metric]:
        events = GaugeMetricFamily(
            "lineage_proxy_spool_events", "Events waiting in the spool.", labels=["spool"]
        )
        size = GaugeMetricFamily(
            "lineage_proxy_spool_bytes", "Bytes the spool holds on disk.", labels=["spool"]
        )
        limit = GaugeMetricFamily(
            "lineage_proxy_spool_max_bytes",
            "Bytes the spool may hold (kafka.spool.max_bytes); at it, events are refused.",
            labels=["spool"],
        )
        age = GaugeMetricFamily(
            "lineage_proxy_spool_oldest_age_seconds",
            "Age of the oldest event not yet confirmed by Kafka.",
            labels=["spool"],
        )
        spooled = CounterMetricFamily(
            "lineage_proxy_spool_spooled",
            "Events acknowledged from the spool because Kafka did not confirm them.",
            labels=["spool"],
        )
        drained = CounterMetricFamily(
            "lineage_proxy_spool_drained",
            "Spooled events Kafka confirmed; its rate is the drain rate.",
            labels=["spool"],
        )
        dead = CounterMetricFamily(
            "lineage_proxy_spool_dead_lettered",
            "Spooled events Kafka refused for good (e.g. too large), set aside in the "
            "spool's dead-letter file so the drain goes on; alert on any increase.",
            labels=["spool"],
        )
        write_failures = CounterMetricFamily(
            "lineage_proxy_spool_write_failures",
            "Spool group commits that failed (disk full, I/O error); their events got 503.",
            labels=["spool"],
        )
        refusing = GaugeMetricFamily(
            "lineage_proxy_spool_refusing",
            "1 while the spool refuses events (full, disk failing or stalled, drain wedged).",
            labels=["spool"],
        )
        for kafka_spool in self._spools():
            label = [kafka_spool.label]
            events.add_metric(label, kafka_spool.spool.events)
            size.add_metric(label, kafka_spool.spool.bytes)
            limit.add_metric(label, kafka_spool.spool.max_bytes)
            age.add_metric(label, kafka_spool.spool.oldest_age)
            spooled.add_metric(label, kafka_spool.spooled_total)
            drained.add_metric(label, kafka_spool.drained_total)
            dead.add_metric(label, kafka_spool.dead_lettered_total)
            write_failures.add_metric(label, kafka_spool.spool.failed_writes)
            refusing.add_metric(label, 0 if kafka_spool.refusing_reason() is None else 1)
        yield from (events, size, limit, age, spooled, drained, dead, write_failures, refusing)
