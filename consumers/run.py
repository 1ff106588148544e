"""Run consumer daemons until SIGTERM/SIGINT: ``lineage-proxy consume NAME|--all``.

Also used by ``serve`` for the daemons named in ``server.run_consumers``, so that one
process can hold the proxy, an embedded broker and a consumer (the quick start).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Mapping, Sequence

from aiohttp import web
from prometheus_client import CollectorRegistry

from consumers.config import ConsumerConfig
from consumers.daemon import ConsumerDaemon
from consumers.metrics import DaemonsCollector
from consumers.status import status_app
from proxy.kafka.settings import KafkaConfig
from proxy.support.tls import ReloadableTls
from proxy.support.yaml_source import ConfigError

__all__ = ["consume_until_signalled", "running_daemons", "select_consumers"]

log = logging.getLogger(__name__)


def select_consumers(consumers: Mapping[str, ConsumerConfig], names: Sequence[str]) -> list[str]:
    """The names to run, checked against the config; empty ``names`` means all."""
    if not consumers:
        raise ConfigError("no consumers are configured (see `consumers:` in config.yaml)")
    unknown = [n for n in names if n not in consumers]
    if unknown:
        known = ", ".join(sorted(consumers))
        raise ConfigError(f"unknown consumer(s) {', '.join(unknown)}; configured: {known}")
    return list(names) or sorted(consumers)


@contextlib.asynccontextmanager
async def running_daemons(
    consumers: Mapping[str, ConsumerConfig],
    kafka: KafkaConfig,
    names: Sequence[str],
    registry: CollectorRegistry | None = None,
) -> AsyncIterator[list[asyncio.Task[None]]]:
    """Start the daemons (and their status servers); on exit drain, commit and leave.
    With ``registry`` (the proxy's), their metrics show there too while they run.

    Yields the daemons' tasks: one ending early means that daemon failed.
    """
    stop = asyncio.Event()
    # Certificates first: one that does not load fails the start before any Kafka client.
    status_tls: dict[str, ReloadableTls] = {}
    for name in names:
        consumer = consumers[name]
        if consumer.status_port is not None and consumer.status_tls is not None:
            status_tls[name] = ReloadableTls(consumer.status_tls, f"consumers.{name}.status_tls")
    daemons = await _daemons(consumers, kafka, names)
    collector = DaemonsCollector([daemon.metrics for daemon in daemons])
    if registry is not None:
        registry.register(collector)
    runners: list[web.AppRunner] = []
    watchers = contextlib.AsyncExitStack()  # status ports' TLS files
    tasks = [asyncio.create_task(d.run(stop), name=f"consumer-{d.name}") for d in daemons]
    try:
        for daemon in daemons:
            consumer = consumers[daemon.name]
            if consumer.status_port is None:
                continue
            tls = status_tls.get(daemon.name)
            runner = web.AppRunner(status_app(daemon), access_log=None)
            await runner.setup()
            runners.append(runner)
            site = web.TCPSite(
                runner,
                consumer.status_host,
                consumer.status_port,
                ssl_context=tls.context if tls else None,
            )
            await site.start()
            if tls is not None:
                await watchers.enter_async_context(tls.watching())
            log.info(
                "consumer %s: /metrics and /healthz on %s://%s:%d",
                daemon.name,
                "https" if tls else "http",
                consumer.status_host,
                consumer.status_port,
            )
        yield tasks
    finally:
        await watchers.aclose()
        stop.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        if registry is not None:
            registry.unregister(collector)
        for runner in runners:
            await runner.cleanup()
        for daemon, result in zip(daemons, results, strict=True):
            if isinstance(result, BaseException):
                log.error("consumer %s failed: %r", daemon.name, result)


async def _daemons(
    consumers: Mapping[str, ConsumerConfig], kafka: KafkaConfig, names: Sequence[str]
) -> list[ConsumerDaemon]:
    """The daemons with their targets open, so that a bad target (a credential whose
    environment variable is not set) fails the start with its consumer's name."""
    daemons: list[ConsumerDaemon] = []
    try:
        for name in names:
            daemon = ConsumerDaemon(
                name,
                consumers[name],
                bootstrap_servers=kafka.bootstrap_servers,
                default_topic=kafka.topic,
                create_topics=kafka.create_topics,
                topic_partitions=kafka.topic_partitions,
                cluster_settings=kafka.producer,
            )
            daemons.append(daemon)
            try:
                await daemon.open_destination()
            except ValueError as exc:
                raise ConfigError(f"consumers.{name}: {exc}") from None
    except BaseException:
        for daemon in daemons:
            await daemon.close_destination()
        raise
    return daemons


async def consume_until_signalled(
    consumers: Mapping[str, ConsumerConfig], kafka: KafkaConfig, names: Sequence[str]
) -> bool:
    """Run until SIGTERM/SIGINT (or a daemon fails); False if any daemon failed."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with running_daemons(consumers, kafka, names) as tasks:
        signalled = asyncio.create_task(stop.wait())
        await asyncio.wait([signalled, *tasks], return_when=asyncio.FIRST_COMPLETED)
        signalled.cancel()
        log.info("stopping consumers")
    return not any(t.exception() for t in tasks if not t.cancelled())
