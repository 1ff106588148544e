"""The supervisor's share of the status page with ``serve --workers N``.

The in-process consumers (``server.run_consumers``) run in the supervisor, not in a
worker, so no worker's registry holds their figures. The supervisor serves this share —
their registry now and its growth over the window, as a :class:`WorkerPart` with no
destinations and no refusals — as ``GET /status`` on its private socket
(:func:`proxy.metrics.workers.serving_registry`); the worker that answers
``/api/v1/status`` adds it to the figures, not to the list of workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator

from aiohttp import web
from prometheus_client import CollectorRegistry

from proxy.metrics.workers import Handler
from proxy.validation.exact_json import dumps
from proxy.web.status.parts import WorkerPart
from proxy.web.status.rates import RateWindow

__all__ = ["SUPERVISOR_PART", "supervisor_status"]

# The ``worker`` of the supervisor's part: no worker has it.
SUPERVISOR_PART = -1


@contextlib.asynccontextmanager
async def supervisor_status(registry: CollectorRegistry) -> AsyncIterator[Handler]:
    """The ``GET /status`` handler of the supervisor's share of ``registry``, sampled
    for the per-minute rates while the context lasts."""
    window = RateWindow(registry)
    started = time.monotonic()

    async def part(request: web.Request) -> web.Response:
        now, growth, seconds = window.now_and_growth()
        share = WorkerPart(
            worker=SUPERVISOR_PART,
            pid=os.getpid(),
            uptime_seconds=round(time.monotonic() - started, 1),
            now=now,
            growth=growth,
            seconds=seconds,
            health={},
            rejections=[],
        )
        return web.Response(body=dumps(share.as_json()))

    sampler = asyncio.create_task(window.run(), name="supervisor-status-sampler")
    try:
        yield part
    finally:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
