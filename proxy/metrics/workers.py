"""What one worker of ``serve --workers N`` knows of its siblings: its place among them,
the private channel they talk over, and a /metrics that shows all of them.

Workers share no memory, so each serves a small HTTP app on a private Unix socket in the
supervisor's runtime directory, and asks its siblings over theirs: this is the one way
workers read from or send to each other. On it: ``/metrics`` (the worker's own
registry), and what other modules add with :meth:`Siblings.add_route` before start —
the status page's figures (:mod:`proxy.web.status`) and the tap's events
(:mod:`proxy.tap.relay`).

Whichever worker the kernel hands a scrape of the public /metrics to asks every sibling
for theirs and answers with all of them, each series labelled ``worker="i"``: one scrape
shows every worker, and the totals are ``sum without (worker) (...)``.
``lineage_proxy_worker_up{worker, pid}`` says which workers answered (0: restarting, or
too busy to answer within the timeout).

The supervisor runs the in-process consumer daemons (``server.run_consumers``); it serves
their registry on its own socket there (:func:`serving_registry`), and the scrape adds
its series labelled ``worker="supervisor"`` (with its ``lineage_proxy_worker_up`` line).
Only the supervisor has ``lineage_consumer_*`` series, so they stay unique and the sums
above stay right.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from proxy.metrics.process import ProxyMetrics

__all__ = ["SUPERVISOR", "Handler", "SiblingAnswer", "Siblings", "WorkerSlot", "serving_registry"]

# A sibling that cannot answer this fast is reported down rather than stalling the reader.
_SIBLING_TIMEOUT_SECONDS = 2.0
_PID_HEADER = "X-Worker-Pid"
# The ``worker`` label of the supervisor's series.
SUPERVISOR = "supervisor"


@dataclass(frozen=True)
class WorkerSlot:
    """Worker ``index`` of ``count``; ``runtime_dir`` holds every worker's socket."""

    index: int
    count: int
    runtime_dir: Path

    def socket(self, index: int) -> Path:
        return self.runtime_dir / f"worker-{index}.sock"

    @property
    def supervisor_socket(self) -> Path:
        """Where the supervisor serves its consumers' metrics, while they run."""
        return self.runtime_dir / f"{SUPERVISOR}.sock"


@dataclass(frozen=True)
class SiblingAnswer:
    """What worker ``worker`` answered; ``body`` is None when it did not (down, slow)."""

    worker: int
    pid: str
    body: bytes | None


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Siblings:
    """This worker's private socket, and requests to every other worker's.

    Lifetime: :meth:`add_route`\\* → ``await start()`` → :meth:`ask_all`,
    :meth:`post`, :meth:`exposition`\\* → ``await close()``.
    """

    def __init__(self, slot: WorkerSlot, metrics: ProxyMetrics) -> None:
        self.slot = slot
        self._metrics = metrics
        self._own = web.Application()
        self._own.router.add_get("/metrics", self._own_metrics)
        self._runner: web.AppRunner | None = None
        self._sessions: dict[int, aiohttp.ClientSession] = {}
        self._supervisor: aiohttp.ClientSession | None = None

    @property
    def others(self) -> list[int]:
        """The other workers' indexes."""
        return [i for i in range(self.slot.count) if i != self.slot.index]

    def add_route(self, method: str, path: str, handler: Handler) -> None:
        """Serve ``handler`` to the siblings (before :meth:`start`); each response gets
        this worker's pid in a header."""
        self._own.router.add_route(method, path, handler)

    async def start(self) -> None:
        self._own.on_response_prepare.append(_with_pid)
        self._runner = web.AppRunner(self._own, access_log=None, handle_signals=False)
        await self._runner.setup()
        path = self.slot.socket(self.slot.index)
        path.unlink(missing_ok=True)  # left by this slot's predecessor, if it died
        await web.UnixSite(self._runner, str(path)).start()
        timeout = aiohttp.ClientTimeout(total=_SIBLING_TIMEOUT_SECONDS)
        self._sessions = {
            index: aiohttp.ClientSession(
                connector=aiohttp.UnixConnector(path=str(self.slot.socket(index))),
                timeout=timeout,
            )
            for index in self.others
        }
        self._supervisor = aiohttp.ClientSession(
            connector=aiohttp.UnixConnector(path=str(self.slot.supervisor_socket)),
            timeout=timeout,
        )

    async def close(self) -> None:
        for session in [*self._sessions.values(), self._supervisor]:
            if session is not None:
                await session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def ask_all(self, path: str) -> list[SiblingAnswer]:
        """GET ``path`` of every other worker at once, in worker order."""
        return list(await asyncio.gather(*(self._ask(i, "GET", path) for i in self.others)))

    async def post(self, index: int, path: str, body: bytes) -> bool:
        """POST ``body`` to worker ``index``'s ``path``; False if it did not take it."""
        return (await self._ask(index, "POST", path, body)).body is not None

    async def exposition(self) -> bytes:
        """Every worker's metrics, labelled by worker, in one Prometheus text document."""
        own = SiblingAnswer(self.slot.index, str(os.getpid()), self._metrics.exposition())
        others = await self.ask_all("/metrics")
        parts = [(str(a.worker), a.pid, a.body) for a in sorted([own, *others], key=_worker)]
        supervisor = await self.ask_supervisor("/metrics")
        if supervisor is not None:
            parts.append((SUPERVISOR, *supervisor))
        registry = CollectorRegistry()
        registry.register(_Merged(parts))
        return generate_latest(registry)

    async def ask_supervisor(self, path: str) -> tuple[str, bytes | None] | None:
        """(pid, body or None if it did not answer) of the supervisor's ``path``; None
        when it serves nothing (no in-process consumers run: its socket is absent)."""
        if not self.slot.supervisor_socket.exists():
            return None
        return await _fetch(self._supervisor, "GET", path)

    async def _own_metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self._metrics.exposition())

    async def _ask(
        self, index: int, method: str, path: str, body: bytes | None = None
    ) -> SiblingAnswer:
        return SiblingAnswer(index, *await _fetch(self._sessions.get(index), method, path, body))


def _worker(answer: SiblingAnswer) -> int:
    return answer.worker


async def _fetch(
    session: aiohttp.ClientSession | None, method: str, path: str, body: bytes | None = None
) -> tuple[str, bytes | None]:
    """(pid, body) of the answer on ``session``'s socket; body None when it did not answer."""
    if session is None or session.closed:
        return "", None
    try:
        async with session.request(method, f"http://worker{path}", data=body) as response:
            response.raise_for_status()
            return response.headers.get(_PID_HEADER, ""), await response.read()
    except (aiohttp.ClientError, TimeoutError):
        return "", None


@contextlib.asynccontextmanager
async def serving_registry(
    registry: CollectorRegistry, path: Path, routes: dict[str, Handler] | None = None
) -> AsyncIterator[None]:
    """The supervisor's side: ``GET /metrics`` of ``registry`` (its consumer daemons'),
    and ``GET`` of each of ``routes``, on the Unix socket ``path`` for the workers."""

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry))

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    for route, handler in (routes or {}).items():
        app.router.add_get(route, handler)
    app.on_response_prepare.append(_with_pid)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.UnixSite(runner, str(path)).start()
        yield
    finally:
        await runner.cleanup()
        await asyncio.to_thread(path.unlink, True)  # the workers look for it


async def _with_pid(request: web.Request, response: web.StreamResponse) -> None:
    response.headers[_PID_HEADER] = str(os.getpid())


class _Merged(Collector):
    """Workers' parsed expositions as one set of families, each sample labelled."""

    def __init__(self, answers: Iterable[tuple[str, str, bytes | None]]) -> None:
        """``answers``: (worker label, pid, exposition or None when it did not answer)."""
        self._answers = list(answers)

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "lineage_proxy_worker_up",
            "1 when the worker answered this scrape with its metrics, by worker and pid.",
            labels=["worker", "pid"],
        )
        families: dict[str, Metric] = {}
        for worker, pid, body in self._answers:
            up.add_metric([worker, pid], 0 if body is None else 1)
            text = "" if body is None else body.decode()
            for family in text_string_to_metric_families(text):
                merged = families.setdefault(
                    family.name, Metric(family.name, family.documentation, family.type)
                )
                for sample in family.samples:
                    merged.samples.append(
                        sample._replace(labels={"worker": worker, **sample.labels})
                    )
        yield up
        yield from families.values()
