"""``lineage-proxy serve``: run the HTTP server until SIGTERM/SIGINT, then drain.

Shutdown order matters for the durability promise: stop accepting connections, let
in-flight requests finish (each waits for its Kafka delivery report), flush the producer,
and only then stop an embedded broker. With ``server.workers`` above 1 this process
supervises that many serving processes (:mod:`proxy.server.workers`), each running
:func:`serve_until_signalled`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import signal
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, TypeVar

from aiohttp import web

from proxy.config.settings import ProxyConfig
from proxy.metrics.workers import WorkerSlot
from proxy.support.tls import ReloadableTls
from proxy.web.app import LINEAGE_BATCH_PLAIN, LINEAGE_PLAIN, create_app, server_options
from proxy.web.connections import GuardedSite
from proxy.web.ingest_lane import install_ingest_lane
from proxy.web.keys import CONFIG, CONNECTIONS, METRICS, RULES, WORKER

__all__ = [
    "CannotListen",
    "listener_tls",
    "run_on_event_loop",
    "serve_until_signalled",
    "serving",
]

T = TypeVar("T")

log = logging.getLogger(__name__)

# What a user can do about a failed bind, in their words rather than the OS's.
_BIND_REASONS = {
    errno.EADDRINUSE: "address in use",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
    errno.EADDRNOTAVAIL: "no such local address",
}


class CannotListen(Exception):
    """The server socket could not be bound: a usage problem (the CLI exits 2), not a crash."""

    def __init__(self, host: str, port: int, error: OSError) -> None:
        reason = _BIND_REASONS.get(error.errno or 0) or (error.strerror or str(error)).lower()
        super().__init__(f"cannot listen on {host}:{port}: {reason}")


@contextlib.asynccontextmanager
async def serving(app: web.Application, tls: ReloadableTls | None = None) -> AsyncIterator[int]:
    """Listen on ``server.host``/``server.port`` (0: any free port, yielded; over TLS with
    ``tls``, its files watched) until exit, then stop accepting, let in-flight requests
    finish and run the app's cleanup."""
    server = app[CONFIG].server
    runner = web.AppRunner(app, handle_signals=False, **server_options(app))
    await runner.setup()
    try:
        # Before the site starts: each connection copies the server's handler when made.
        install_ingest_lane(runner, (LINEAGE_PLAIN, LINEAGE_BATCH_PLAIN))
        app[CONNECTIONS].apply_fd_limit()
        site = GuardedSite(
            runner,
            app[CONNECTIONS],
            server.host,
            server.port,
            ssl_context=tls.context if tls else None,
            # Workers of `serve --workers N` share the port; a single process owns it alone.
            reuse_port=WORKER in app,
        )
        try:
            await site.start()
        except OSError as exc:
            raise CannotListen(server.host, server.port, exc) from None
        async with tls.watching() if tls else contextlib.nullcontext():
            yield site.port
    finally:
        await runner.cleanup()


def _tune_garbage_collector() -> None:
    """Everything built at start-up (compiled facet models, modules, the rules) lives as
    long as the process: frozen, the cyclic collector stops re-scanning it; and a larger
    first generation runs the collector less often per request. Together about 20% less
    CPU per single event (docs/contributing/benchmark-history.md). Request garbage is
    acyclic almost entirely and freed by reference counting whatever the thresholds."""
    gc.freeze()
    gc.set_threshold(10_000, 50, 100)


def listener_tls(config: ProxyConfig) -> ReloadableTls | None:
    """``server.tls`` loaded (a file that does not load fails here, naming it), or None."""
    return ReloadableTls(config.server.tls, "server.tls") if config.server.tls else None


async def serve_until_signalled(
    config: ProxyConfig,
    worker: WorkerSlot | None = None,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT, then drain. As a worker (``worker`` given) the
    consumer daemons are left to the supervisor, which runs them once."""
    tls = listener_tls(config)
    app = create_app(config, worker)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with contextlib.AsyncExitStack() as running:
        # Exits run in reverse: the proxy stops first (its producer flushed), then the
        # consumers deliver what is left.
        if config.server.run_consumers and worker is None:
            from consumers.run import running_daemons

            await running.enter_async_context(
                running_daemons(
                    config.consumers,
                    config.kafka,
                    config.server.run_consumers,
                    app[METRICS].registry,
                )
            )
        port = await running.enter_async_context(serving(app, tls))
        _tune_garbage_collector()
        log.info(
            "lineage-proxy listening on %s://%s:%d (Kafka %s, topic %s)",
            "https" if tls else "http",
            config.server.host,
            port,
            config.kafka.bootstrap_servers,
            config.kafka.topic,
        )
        # SIGHUP re-reads the rules file and the TLS certificate; a broken one is refused
        # and the old one stays.
        loop.add_signal_handler(signal.SIGHUP, _reload, app, tls)
        if on_ready is not None:
            on_ready()
        await stop.wait()
        log.info(
            "shutting down: draining in-flight requests and unconfirmed Kafka deliveries "
            "for at most %.0f s (server.shutdown_timeout_seconds)",
            config.server.shutdown_timeout_seconds,
        )
    log.info("stopped")


def _loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop ``server.event_loop`` names; asyncio's own where uvloop is missing
    (it has no Windows build)."""
    if name == "uvloop":
        try:
            import uvloop
        except ImportError:
            log.warning("server.event_loop: uvloop is not installed; using asyncio's loop")
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


def run_on_event_loop(config: ProxyConfig, main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on the loop ``server.event_loop`` names (the server
    and each worker process of ``serve --workers``)."""
    with asyncio.Runner(loop_factory=_loop_factory(config.server.event_loop)) as runner:
        return runner.run(main)


def _reload(app: web.Application, tls: ReloadableTls | None) -> None:
    app[RULES].request_reload()
    if tls is not None:
        tls.request_reload()
