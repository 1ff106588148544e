"""``lineage-proxy serve``: run the HTTP server until SIGTERM/SIGINT, then drain.

Shutdown order matters for the durability promise: stop accepting connections, let
in-flight requests finish (each waits for its Kafka delivery report), flush the producer,
and only then stop an embedded broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from aiohttp import web

from proxy.app import RULES, create_app, server_options
from proxy.config import ProxyConfig
from proxy.embedded_broker import EmbeddedBroker

__all__ = ["run_server"]

log = logging.getLogger(__name__)


async def _serve(config: ProxyConfig) -> None:
    app = create_app(config)
    runner = web.AppRunner(app, handle_signals=False, **server_options(config))
    await runner.setup()
    site = web.TCPSite(runner, config.server.host, config.server.port)
    await site.start()
    log.info(
        "lineage-proxy listening on http://%s:%d (Kafka %s, topic %s)",
        config.server.host,
        config.server.port,
        config.kafka.bootstrap_servers,
        config.kafka.topic,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # SIGHUP re-reads the rules file; a broken one is refused and the old rules stay.
    loop.add_signal_handler(signal.SIGHUP, app[RULES].request_reload)
    async with contextlib.AsyncExitStack() as consumers:
        if config.server.run_consumers:
            from consumers.run import running_daemons

            await consumers.enter_async_context(
                running_daemons(config, config.server.run_consumers, config.kafka.bootstrap_servers)
            )
        await stop.wait()
        log.info(
            "shutting down: draining in-flight requests and unconfirmed Kafka deliveries "
            "for at most %.0f s (server.shutdown_timeout_seconds)",
            config.server.shutdown_timeout_seconds,
        )
        # The proxy first (its producer flushed), then the consumers deliver what is left.
        await runner.cleanup()
    log.info("stopped")


def run_server(config: ProxyConfig) -> None:
    """Start an embedded broker if the config asks for one, then serve until signalled."""
    with contextlib.ExitStack() as stack:
        if config.kafka.bootstrap_servers == "embedded":
            broker = stack.enter_context(EmbeddedBroker())
            kafka = config.kafka.model_copy(update={"bootstrap_servers": broker.bootstrap_servers})
            config = config.model_copy(update={"kafka": kafka})
        asyncio.run(_serve(config))
