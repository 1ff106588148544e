"""What one worker of ``serve --workers N`` knows of its siblings: its place among them,
and a /metrics that shows all of them.

Workers share no memory, so each keeps its own Prometheus registry and serves it on a
private Unix socket in the supervisor's runtime directory. Whichever worker the kernel
hands a scrape of the public /metrics to asks every sibling for theirs and answers with
all of them, each series labelled ``worker="i"``: one scrape shows every worker, and the
totals are ``sum without (worker) (...)``. ``lineage_proxy_worker_up{worker, pid}`` says
which workers answered (0: restarting, or too busy to answer within the timeout).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from proxy.metrics import ProxyMetrics

__all__ = ["WorkerMetrics", "WorkerSlot"]

# A sibling that cannot answer this fast is reported down rather than stalling the scrape.
_SIBLING_TIMEOUT_SECONDS = 2.0
_PID_HEADER = "X-Worker-Pid"


@dataclass(frozen=True)
class WorkerSlot:
    """Worker ``index`` of ``count``; ``runtime_dir`` holds every worker's metrics socket."""

    index: int
    count: int
    runtime_dir: Path

    def metrics_socket(self, index: int) -> Path:
        return self.runtime_dir / f"worker-{index}.sock"


@dataclass(frozen=True)
class _Answer:
    worker: int
    pid: str
    exposition: str | None


class WorkerMetrics:
    """This worker's registry on its private socket, and every worker's on /metrics.

    Lifetime: ``await start()`` → :meth:`exposition`\\* → ``await close()``.
    """

    def __init__(self, slot: WorkerSlot, metrics: ProxyMetrics) -> None:
        self._slot = slot
        self._metrics = metrics
        self._runner: web.AppRunner | None = None
        self._sessions: dict[int, aiohttp.ClientSession] = {}

    async def start(self) -> None:
        own = web.Application()
        own.router.add_get("/metrics", self._own)
        self._runner = web.AppRunner(own, access_log=None, handle_signals=False)
        await self._runner.setup()
        path = self._slot.metrics_socket(self._slot.index)
        path.unlink(missing_ok=True)  # left by this slot's predecessor, if it died
        await web.UnixSite(self._runner, str(path)).start()
        timeout = aiohttp.ClientTimeout(total=_SIBLING_TIMEOUT_SECONDS)
        self._sessions = {
            index: aiohttp.ClientSession(
                connector=aiohttp.UnixConnector(path=str(self._slot.metrics_socket(index))),
                timeout=timeout,
            )
            for index in range(self._slot.count)
            if index != self._slot.index
        }

    async def close(self) -> None:
        for session in self._sessions.values():
            await session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def exposition(self) -> bytes:
        """Every worker's metrics, labelled by worker, in one Prometheus text document."""
        own = _Answer(self._slot.index, str(os.getpid()), self._metrics.exposition().decode())
        others = await asyncio.gather(*(self._ask(i, s) for i, s in self._sessions.items()))
        registry = CollectorRegistry()
        registry.register(_Merged(sorted([own, *others], key=lambda a: a.worker)))
        return generate_latest(registry)

    async def _own(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self._metrics.exposition(), headers={_PID_HEADER: str(os.getpid())}
        )

    async def _ask(self, index: int, session: aiohttp.ClientSession) -> _Answer:
        try:
            async with session.get("http://worker/metrics") as response:
                response.raise_for_status()
                return _Answer(index, response.headers.get(_PID_HEADER, ""), await response.text())
        except (aiohttp.ClientError, TimeoutError):
            return _Answer(index, "", None)


class _Merged(Collector):
    """Workers' parsed expositions as one set of families, each sample labelled."""

    def __init__(self, answers: Iterable[_Answer]) -> None:
        self._answers = list(answers)

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "lineage_proxy_worker_up",
            "1 when the worker answered this scrape with its metrics, by worker and pid.",
            labels=["worker", "pid"],
        )
        families: dict[str, Metric] = {}
        for answer in self._answers:
            worker = str(answer.worker)
            up.add_metric([worker, answer.pid], 0 if answer.exposition is None else 1)
            for family in text_string_to_metric_families(answer.exposition or ""):
                merged = families.setdefault(
                    family.name, Metric(family.name, family.documentation, family.type)
                )
                for sample in family.samples:
                    merged.samples.append(
                        sample._replace(labels={"worker": worker, **sample.labels})
                    )
        yield up
        yield from families.values()
