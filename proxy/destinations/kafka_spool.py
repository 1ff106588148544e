"""Kafka through an outage: spool what the broker cannot confirm, drain it in order later.

One :class:`KafkaSpool` per Kafka cluster the proxy writes to: a :class:`Spool` on local
disk plus a drainer task that forwards spooled messages with the same topic, key and
headers as a direct send, oldest first — so per key, in the order they were accepted —
and lets the spool delete a segment once Kafka confirmed every record in it. A spool
left by an earlier run is drained at start.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from proxy.destinations.kafka import KafkaProducer
from proxy.destinations.spool import Headers, Spool, SpooledRecord

__all__ = ["KafkaSpool", "SpoolMetrics", "SpoolRoots", "spool_directory", "spool_roots"]

log = logging.getLogger(__name__)

# Records sent per drain round; small enough to stay far below librdkafka's local queue.
_DRAIN_BATCH = 500
_MAX_BACKOFF = 5.0


def spool_directory(root: Path, bootstrap_servers: str) -> Path:
    """One directory per cluster under ``root``, named after its bootstrap servers."""
    return root / re.sub(r"[^A-Za-z0-9.-]+", "_", bootstrap_servers)[:200]


@dataclass(frozen=True)
class SpoolRoots:
    """Where one proxy process spools (``own``), and the spools no live process owns that
    it drains too (``orphans``); each root holds one directory per cluster."""

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

    async def start(self) -> None:
        await self.spool.open()
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
        """Whether the spool can take more events (not full, writer alive)."""
        return self.spool.writable and self.spool.bytes < self.spool.max_bytes

    def status(self) -> dict[str, Any]:
        return {
            "spooling": self.spool.events > 0,
            "events": self.spool.events,
            "bytes": self.spool.bytes,
            "oldest_age_seconds": round(self.spool.oldest_age, 3),
        }

    async def _drain_forever(self) -> None:
        backoff = 0.5
        while True:
            try:
                records = await self._next_records()
                await self._send_in_order(records)
                await self.spool.confirm(records)
                self.drained_total += len(records)
                backoff = 0.5
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bug or a disk error: say so, wait, and go on — never die silently.
                log.exception("spool drainer failed; trying again in %.1f s", backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)

    async def _next_records(self) -> list[SpooledRecord]:
        while True:
            self.spool.changed.clear()
            records = await self.spool.read(_DRAIN_BATCH)
            if records:
                return records
            await self.spool.changed.wait()

    async def _send_in_order(self, records: list[SpooledRecord]) -> None:
        """Produce every record (tasks are created, so produce() is called, in spool
        order; librdkafka keeps that order per partition) until all are confirmed."""
        remaining = records
        backoff = 0.5
        while remaining:
            if self._before_send is not None:
                for topic in dict.fromkeys(r.topic for r in remaining):
                    await self._before_send(topic)
            results = await asyncio.gather(
                *(self._producer.produce(r.topic, r.value, r.key, r.headers) for r in remaining),
                return_exceptions=True,
            )
            failed = [r for r, result in zip(remaining, results, strict=True) if _failed(result)]
            if failed:
                log.warning(
                    "spool drain: Kafka did not confirm %d of %d events (%s); retrying in %.1f s",
                    len(failed),
                    len(remaining),
                    next(r for r in results if _failed(r)),
                    backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
            remaining = failed


def _failed(result: object) -> bool:
    return isinstance(result, BaseException)


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
        for kafka_spool in self._spools():
            label = [str(kafka_spool.spool.directory)]
            events.add_metric(label, kafka_spool.spool.events)
            size.add_metric(label, kafka_spool.spool.bytes)
            limit.add_metric(label, kafka_spool.spool.max_bytes)
            age.add_metric(label, kafka_spool.spool.oldest_age)
            spooled.add_metric(label, kafka_spool.spooled_total)
            drained.add_metric(label, kafka_spool.drained_total)
        yield from (events, size, limit, age, spooled, drained)
