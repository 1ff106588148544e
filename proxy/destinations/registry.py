"""From a destination's config to a live destination, and the resources the kinds share.

The configs are the kinds' models (:mod:`proxy.destinations.kinds`, pure, read by rules
files and consumers); :func:`build_destination` imports the module a model names as its
``runtime`` and calls its ``build``, then wraps the result in the one retry loop. Kafka
destinations share one producer unless their ``producer`` overrides differ; relative
archive directories are placed under the configured archive root.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proxy.destinations.base import Destination
from proxy.destinations.kafka.spool import Spool, SpoolLocked
from proxy.destinations.kafka.spool_dirs import (
    cluster_for,
    spool_contents,
    spool_directories,
    spool_directory,
)
from proxy.destinations.kafka.spool_drainer import KafkaSpool, SpoolRoots
from proxy.destinations.kinds import DestinationConfig
from proxy.destinations.retry import CircuitBreaker, OnRetry, RetryingDestination
from proxy.kafka.client_logs import failure_reason
from proxy.kafka.producer import KafkaProducer
from proxy.kafka.settings import KafkaConfig, producer_settings

__all__ = ["DestinationResources", "build_destination"]

log = logging.getLogger(__name__)

# How long shutdown waits for Kafka to confirm what a spool drainer had sent.
_SPOOLED_FLUSH_SECONDS = 2.0


class DestinationResources:
    """What destinations share: Kafka producers (by settings) and the archive root.

    Owned by the app: created at start, :meth:`close` flushes and stops the producers
    after every destination using them is closed.
    """

    def __init__(
        self, kafka: KafkaConfig, archive_root: Path, spool_roots: SpoolRoots | None = None
    ) -> None:
        self.kafka = kafka
        self.archive_root = archive_root
        # Where this process spools, and the spools it drains that no process owns.
        self.spool_roots = spool_roots or SpoolRoots(kafka.spool.directory)
        self._producers: dict[tuple[tuple[str, Any], ...], KafkaProducer] = {}
        self._ensured: set[str] = set()
        # Topics to create (name → partitions, replication) once a broker answers.
        self._wanted: dict[str, tuple[int, int]] = {}
        # One spool per cluster (bootstrap servers), shared by its producers' destinations.
        self._spools: dict[str, KafkaSpool] = {}
        # Spools left on disk being drained (nothing is appended to them).
        self._adopted: list[KafkaSpool] = []

    def producer(
        self, overrides: Mapping[str, Any], bootstrap_servers: str | None = None
    ) -> KafkaProducer:
        """The started producer for these settings, on ``bootstrap_servers`` (default: the
        configured cluster)."""
        settings = producer_settings(
            bootstrap_servers or self.kafka.bootstrap_servers,
            {**self.kafka.producer, **overrides},
        )
        key = tuple(sorted(settings.items()))
        if key not in self._producers:
            producer = KafkaProducer(settings)
            producer.start()
            self._producers[key] = producer
        return self._producers[key]

    @property
    def producers(self) -> list[KafkaProducer]:
        return list(self._producers.values())

    @property
    def spools(self) -> list[KafkaSpool]:
        return [*self._spools.values(), *self._adopted]

    async def spool_for(self, producer: KafkaProducer) -> KafkaSpool | None:
        """The started spool for ``producer``'s cluster, or None when spooling is off."""
        config = self.kafka.spool
        if not config.enabled:
            return None
        servers = producer.settings["bootstrap.servers"]
        if servers not in self._spools:
            directory = spool_directory(self.spool_roots.own, servers, self.kafka.bootstrap_servers)
            spool = self._kafka_spool(directory, producer)
            await spool.start()
            self._spools[servers] = spool
        return self._spools[servers]

    def _kafka_spool(self, directory: Path, producer: KafkaProducer) -> KafkaSpool:
        config = self.kafka.spool
        return KafkaSpool(
            Spool(directory, config.max_bytes, config.segment_bytes, config.write_timeout_seconds),
            producer,
            before_send=functools.partial(self._create_wanted, producer),
        )

    async def forward_leftovers(self) -> None:
        """Drain every spool left on disk under this process's roots (see
        :func:`spool_roots`) that no destination of this process writes: an earlier run's
        with another address for the same cluster, an older version's, a larger worker
        count's. One held by another live process is left to it; one written for a
        cluster this config does not write to is named, with its count and how to send
        it — never left without a word. Called once the rules' destinations are built."""
        in_use = {spool.spool.directory for spool in self.spools}
        roots = (self.spool_roots.own, *self.spool_roots.orphans)
        found = await asyncio.to_thread(spool_directories, roots)
        configured = self.kafka.bootstrap_servers
        clusters = {p.settings["bootstrap.servers"] for p in self._producers.values()}
        for directory in (d for d in found if d not in in_use):
            servers = await asyncio.to_thread(cluster_for, directory, configured, clusters)
            if servers is None:
                await self._name_stranded(directory)
                continue
            producer = next(
                (p for p in self._producers.values() if p.settings["bootstrap.servers"] == servers),
                None,
            ) or self.producer({}, servers)
            orphan = self._kafka_spool(directory, producer)
            try:
                await orphan.start()
            except SpoolLocked:
                log.info("spool %s is held by another live process; left to it", directory)
                continue
            log.warning(
                "forwarding %d events left in spool %s to Kafka at %s",
                orphan.spool.events,
                directory,
                servers,
            )
            self._adopted.append(orphan)

    async def _name_stranded(self, directory: Path) -> None:
        contents = await asyncio.to_thread(spool_contents, directory)
        log.error(
            "spool %s holds %d acknowledged events for Kafka at %s, a cluster this "
            "configuration does not write to: they are NOT forwarded. Send them with "
            "`lineage-proxy spool drain %s --bootstrap-servers HOST:PORT` (the cluster "
            "they are meant for)",
            directory,
            contents.events,
            contents.cluster,
            directory,
        )

    async def ensure_topic(self, producer: KafkaProducer, topic: str, config: Any) -> None:
        """Create ``topic`` once per process if config.yaml allows; a failure only warns
        (the broker may come later: the spool drainer tries again before it sends)."""
        if not self.kafka.create_topics:
            return
        partitions = config.partitions or self.kafka.topic_partitions
        # -1 asks the broker for its default.replication.factor.
        replication = config.replication_factor or self.kafka.topic_replication_factor or -1
        self._wanted[topic] = (partitions, replication)
        await self._create_wanted(producer, topic)

    async def _create_wanted(self, producer: KafkaProducer, topic: str) -> None:
        if topic in self._ensured or topic not in self._wanted:
            return
        try:
            await asyncio.to_thread(producer.ensure_topics, {topic: self._wanted[topic]}, 3.0)
            self._ensured.add(topic)
        except Exception as exc:
            log.warning("could not ensure topic %s: %s", topic, failure_reason(exc))

    async def close(self, flush_seconds: float) -> None:
        """Flush every producer within ``flush_seconds`` in all, then stop them."""
        deadline = time.monotonic() + flush_seconds
        spooled = set(self._spools)
        for spool in self.spools:
            await spool.close()
        self._spools.clear()
        self._adopted.clear()
        for producer in self._producers.values():
            servers = producer.settings["bootstrap.servers"]
            wait = max(0.0, deadline - time.monotonic())
            if servers in spooled:
                # Every client was answered before this point, so what the producer still
                # holds is the drainer's: already in the spool, sent again at next start.
                wait = min(wait, _SPOOLED_FLUSH_SECONDS)
            queued = producer.queued()
            if queued:
                log.info(
                    "shutdown: waiting up to %.1f s for the Kafka broker (%s) to confirm "
                    "%d queued events",
                    wait,
                    servers,
                    queued,
                )
            left = await asyncio.to_thread(producer.flush, wait)
            if left and servers not in spooled:
                log.error("%d Kafka deliveries still queued at shutdown", left)
            producer.stop()
        self._producers.clear()


async def build_destination(
    name: str,
    config: DestinationConfig,
    resources: DestinationResources,
    *,
    breaker: CircuitBreaker | None = None,
    on_retry: OnRetry | None = None,
) -> Destination:
    """A started destination for ``config`` (topics ensured, files opened).

    With a ``retry`` policy in ``config`` it is wrapped once, the same way for every kind
    and for routes and consumers alike: retried per the policy and paced by ``breaker``
    (a fresh one by default).
    """
    build = importlib.import_module(type(config).runtime).build
    destination: Destination = await build(name, config, resources)
    retry = config.retry_policy()
    if retry is not None:
        destination = RetryingDestination(
            destination, retry, breaker=breaker or CircuitBreaker(), on_retry=on_retry
        )
    await destination.start()
    return destination
