"""``serve``: one proxy process, or (``--workers N``) N on one port under one supervisor.

One Python process is one event loop on one core; several worker processes use several.
Each worker is a whole proxy — its own event loop, Kafka producer, spool directory
(``kafka.spool.directory/worker-<i>``) and archive files (named by pid) — and listens on
the port with ``SO_REUSEPORT``, so the kernel spreads new connections over the workers.

The supervisor holds what must exist once: the port (bound with ``SO_REUSEPORT`` before
any worker starts, so a busy port fails at once with exit 2, port 0 becomes one port for
all, and no other program can take it while a worker restarts), the embedded broker
(started by :func:`run_server` before this), and the consumer daemons of
``server.run_consumers`` (their metrics served to the workers on the supervisor's private
socket, so the proxy's /metrics and status page show them: :mod:`proxy.metrics.workers`,
:mod:`proxy.web.status.supervisor`).

Signals: SIGTERM or SIGINT → every worker drains as a single proxy does (in-flight
requests answered, Kafka flushed) and exits; then the consumers stop; exit 0 when every
worker stopped cleanly. SIGHUP is passed to every worker (rules reload). A worker that
dies after it was serving is restarted in its slot, after a pause that grows while it
keeps dying (1 s up to 30 s); the new one drains its predecessor's spool (a replacement
that cannot start is retried the same way while the others serve). A worker that fails
at start-up (a broken rules file) would fail again: everything stops and the supervisor
exits with the worker's code. Workers stop by themselves when the supervisor
is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import resource
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

from proxy.config.settings import ConfigError, ProxyConfig
from proxy.metrics.workers import WorkerSlot, serving_registry
from proxy.server.embedded_broker import EmbeddedBroker
from proxy.server.serve import CannotListen, run_on_event_loop, serve_until_signalled
from proxy.support.logs import setup_logging
from proxy.web.status.supervisor import supervisor_status

__all__ = ["run_server", "supervise"]

log = logging.getLogger(__name__)

# Workers are started fresh (spawn), never forked from a process that runs threads
# (librdkafka's, the consumers') whose locks a fork would copy mid-use.
_SPAWN = multiprocessing.get_context("spawn")
_FIRST_PAUSE, _MAX_PAUSE = 1.0, 30.0
# A worker that served this long before dying starts over from the shortest pause.
_STABLE_SECONDS = 60.0
# Beyond server.shutdown_timeout_seconds, what a worker may take to exit before SIGKILL.
_EXIT_GRACE_SECONDS = 10.0
EXIT_FAILED = 1


async def supervise(config: ProxyConfig, count: int) -> int:
    """Run ``count`` workers until SIGTERM/SIGINT; returns the exit code."""
    server = config.server
    reserved = _reserve_port(server.host, server.port)
    port = reserved[0].getsockname()[1]
    config = config.model_copy(
        update={"server": server.model_copy(update={"port": port, "workers": count})}
    )
    runtime = tempfile.TemporaryDirectory(prefix="lineage-proxy-workers-")
    pool = _Pool(config, count, Path(runtime.name))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, pool.stop.set)
    loop.add_signal_handler(signal.SIGHUP, pool.signal_all, signal.SIGHUP)
    try:
        async with contextlib.AsyncExitStack() as running:
            workers = asyncio.create_task(pool.run(), name="workers")
            # The consumers start once every worker serves: the workers create the topics,
            # and a consumer subscribed to a topic that does not exist yet would only see
            # it at its next metadata refresh (minutes).
            serving = asyncio.create_task(pool.serving.wait())
            await asyncio.wait([workers, serving], return_when=asyncio.FIRST_COMPLETED)
            serving.cancel()
            # Exits run in reverse: the workers stop first (awaited below), then the
            # consumers deliver what is left.
            if server.run_consumers and not workers.done():
                from prometheus_client import CollectorRegistry

                from consumers.run import running_daemons

                registry = CollectorRegistry()
                await running.enter_async_context(
                    running_daemons(config.consumers, config.kafka, server.run_consumers, registry)
                )
                status = await running.enter_async_context(supervisor_status(registry))
                await running.enter_async_context(
                    serving_registry(registry, pool.supervisor_socket, {"/status": status})
                )
            log.info(
                "lineage-proxy: %d workers on %s://%s:%d (Kafka %s, topic %s)",
                count,
                "https" if server.tls else "http",
                server.host,
                port,
                config.kafka.bootstrap_servers,
                config.kafka.topic,
            )
            return await workers
    finally:
        for sock in reserved:
            sock.close()
        runtime.cleanup()


def _reserve_port(host: str, port: int) -> list[socket.socket]:
    """Bind (not listen) ``host:port`` with SO_REUSEPORT on every address ``host`` has,
    as the workers' ``create_server`` will; port 0 becomes one free port for all."""
    sockets: list[socket.socket] = []
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(sockets) > 1:
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock.bind(address)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise CannotListen(host, port, exc) from None
    return sockets


@dataclass
class _Worker:
    slot: WorkerSlot
    process: BaseProcess
    # The supervisor's end of the pipe to the worker: "ready", or end-of-file at its exit.
    connection: Connection
    # Set once it said "ready": its signal handlers are in place from then on.
    serving: bool = False


class _Pool:
    """The workers' slots: each started, watched, restarted or stopped."""

    def __init__(self, config: ProxyConfig, count: int, runtime: Path) -> None:
        self._config = config
        self._count = count
        # Every worker's private socket, and the supervisor's.
        self._slots = [WorkerSlot(i, count, runtime) for i in range(count)]
        self.stop = asyncio.Event()
        # Set once the first worker of every slot serves.
        self.serving = asyncio.Event()
        self._workers: dict[int, _Worker] = {}
        # Exit code of a worker that failed before it served: ends the whole run.
        self._fatal: int | None = None
        self._unclean = False

    @property
    def supervisor_socket(self) -> Path:
        return self._slots[0].supervisor_socket

    async def run(self) -> int:
        tasks = [
            asyncio.create_task(self._keep(slot), name=f"worker-{slot.index}")
            for slot in self._slots
        ]
        await self.stop.wait()
        log.info("stopping %d workers: each drains its requests and Kafka deliveries", self._count)
        self.signal_all(signal.SIGTERM)
        await asyncio.gather(*tasks)
        if self._fatal is not None:
            return self._fatal
        return EXIT_FAILED if self._unclean else 0

    def signal_all(self, sig: signal.Signals) -> None:
        """Send ``sig`` to every live worker; SIGHUP only to those serving (to one still
        starting, without its handler yet, SIGHUP would be fatal — it reads the rules
        file as it starts anyway)."""
        for worker in self._workers.values():
            if sig == signal.SIGHUP and not worker.serving:
                continue
            if worker.process.pid is not None and worker.process.exitcode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.process.pid, sig)

    async def _keep(self, slot: WorkerSlot) -> None:
        """Run the slot's worker, restart it when it dies, until the pool stops."""
        pause = _FIRST_PAUSE
        started_once = False
        while not self.stop.is_set():
            worker = self._start(slot)
            if not await _became_ready(worker):
                await self._stopped(worker, served=False)
                if self.stop.is_set():
                    return
                code = worker.process.exitcode
                if not started_once:
                    # At start-up every worker would fail alike (a broken rules file).
                    log.error(
                        "worker %d failed to start (exit code %s); stopping", slot.index, code
                    )
                    self._fatal = code if code is not None and code > 0 else EXIT_FAILED
                    self.stop.set()
                    return
                # A replacement that cannot start (the rules file broke since): the
                # other workers keep serving; try again.
                log.error("worker %d failed to start again (exit code %s)", slot.index, code)
            else:
                started_once = worker.serving = True
                if len(self._workers) == self._count and all(
                    w.serving for w in self._workers.values()
                ):
                    self.serving.set()
                served_from = time.monotonic()
                exited = asyncio.create_task(_exited(worker.process))
                stopping = asyncio.create_task(self.stop.wait())
                await asyncio.wait([exited, stopping], return_when=asyncio.FIRST_COMPLETED)
                stopping.cancel()
                if self.stop.is_set():
                    exited.cancel()
                    await self._stopped(worker, served=True)
                    return
                if time.monotonic() - served_from > _STABLE_SECONDS:
                    pause = _FIRST_PAUSE
                log.error(
                    "worker %d (pid %s) died (exit code %s)",
                    slot.index,
                    worker.process.pid,
                    worker.process.exitcode,
                )
            log.info("starting a new worker %d in %.0f s", slot.index, pause)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), pause)
            pause = min(pause * 2, _MAX_PAUSE)

    def _start(self, slot: WorkerSlot) -> _Worker:
        # The worker says "ready" on its end; each side sees the other's exit as
        # end-of-file (the worker: the supervisor is gone).
        supervisor_end, worker_end = _SPAWN.Pipe()
        process = _SPAWN.Process(
            target=_worker_main,
            args=(self._config, slot, worker_end),
            name=f"lineage-proxy-worker-{slot.index}",
        )
        process.start()
        worker_end.close()  # the worker's copy is the only one now
        worker = _Worker(slot, process, supervisor_end)
        self._workers[slot.index] = worker
        return worker

    async def _stopped(self, worker: _Worker, *, served: bool) -> None:
        """Wait for a signalled worker to exit; SIGKILL it after the shutdown budget.
        A worker that served must exit 0 (it drained); one stopped while starting may not."""
        budget = self._config.server.shutdown_timeout_seconds + _EXIT_GRACE_SECONDS
        try:
            await asyncio.wait_for(_exited(worker.process), budget)
        except TimeoutError:
            log.error("worker %d did not stop in %.0f s; killing it", worker.slot.index, budget)
            worker.process.kill()
            await _exited(worker.process)
        worker.connection.close()
        if served and worker.process.exitcode != 0:
            self._unclean = True


async def _readable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not done.done():
            done.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await done
    finally:
        loop.remove_reader(fd)


async def _became_ready(worker: _Worker) -> bool:
    """True once the worker serves; False if it exited first."""
    await _readable(worker.connection.fileno())
    try:
        worker.connection.recv()
    except EOFError:
        return False
    return True


async def _exited(process: BaseProcess) -> None:
    await _readable(process.sentinel)
    process.join()


def _worker_main(config: ProxyConfig, slot: WorkerSlot, supervisor: Connection) -> None:
    """A worker process: serve until SIGTERM, as a single proxy would."""
    setup_logging(config.logging.level, config.logging.json_format, f"worker-{slot.index}")
    try:
        run_on_event_loop(config, _serve_as_worker(config, slot, supervisor))
    except ConfigError as exc:
        print(f"configuration error:\n{exc}", file=sys.stderr)
        sys.exit(2)


async def _serve_as_worker(config: ProxyConfig, slot: WorkerSlot, supervisor: Connection) -> None:
    watch = asyncio.create_task(_stop_when_orphaned(supervisor))
    try:
        await serve_until_signalled(config, slot, on_ready=lambda: supervisor.send(os.getpid()))
    finally:
        watch.cancel()


async def _stop_when_orphaned(supervisor: Connection) -> None:
    """The supervisor never writes after start: end-of-file means it is gone (killed),
    so stop as if it had sent SIGTERM."""
    await _readable(supervisor.fileno())
    log.warning("the supervisor is gone; stopping")
    os.kill(os.getpid(), signal.SIGTERM)


def run_server(config: ProxyConfig) -> int:
    """Start an embedded broker if the config asks for one (once, also for several
    workers), then serve until signalled; returns the exit code."""
    _raise_open_file_limit()
    with contextlib.ExitStack() as stack:
        if config.kafka.bootstrap_servers == "embedded":
            broker = stack.enter_context(EmbeddedBroker(config.kafka.embedded_port or None))
            kafka = config.kafka.model_copy(update={"bootstrap_servers": broker.bootstrap_servers})
            config = config.model_copy(update={"kafka": kafka})
        workers = config.server.worker_count()
        if workers == 1:
            run_on_event_loop(config, serve_until_signalled(config))
            return 0
        return asyncio.run(supervise(config, workers))


def _raise_open_file_limit() -> None:
    """Every connection is a file descriptor: allow as many as the hard limit does."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
