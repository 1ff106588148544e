"""``GET /`` and ``/ui`` (the page) and ``GET /api/v1/status`` (the JSON it polls).

The page is one static file with its script and styles inline: no build step, nothing
fetched from elsewhere, and a Content-Security-Policy that lets it talk to this proxy
only. It holds no figures itself, so it is served without a token; the JSON needs a
valid Bearer token when auth is on (any configured token: the figures are aggregates,
and the refusals list where and why, never an event). ``server.status_page: false``
removes all three routes.

With ``serve --workers N`` the worker that takes the request asks its siblings for
their share (``GET /status`` on their private sockets) and answers for the whole proxy
(:mod:`.parts`); a sibling that does not answer within the channel's timeout is listed
as down.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.resources
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence

from aiohttp import web
from prometheus_client import CollectorRegistry

from proxy.destinations import Destination
from proxy.metrics.workers import Siblings
from proxy.validation.exact_json import dumps, loads
from proxy.web.keys import AUTHENTICATOR
from proxy.web.principal import principal_of
from proxy.web.readiness import Health, destination_health
from proxy.web.rejections import RecentRejections
from proxy.web.status.parts import WorkerPart
from proxy.web.status.rates import RateWindow
from proxy.web.status.report import status_report

__all__ = ["StatusPage"]

log = logging.getLogger(__name__)

# Health (a Kafka metadata request, an archive probe) is asked at most this often, however
# many pages poll.
_HEALTH_SECONDS = 2.0

_PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; "
    "style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class StatusPage:
    """The page's routes and the sampler behind its per-minute rates."""

    def __init__(
        self,
        registry: CollectorRegistry,
        recent: RecentRejections,
        destinations: Callable[[], Sequence[Destination]],
        siblings: Siblings | None = None,
    ) -> None:
        self.window = RateWindow(registry)
        self.siblings = siblings
        self.recent = recent
        self.destinations = destinations
        self.started = time.monotonic()
        # (when, of which destinations, their health)
        self._health: tuple[float, tuple[int, ...], dict[str, Health]] | None = None
        self._page = importlib.resources.files(__package__).joinpath("page.html").read_bytes()

    def add_to(self, app: web.Application) -> None:
        app.router.add_get("/", self.page, name="status_page")
        app.router.add_get("/ui", self.page, name="status_page_ui")
        app.router.add_get("/api/v1/status", self.status, name="status")
        app.cleanup_ctx.append(self._sampling)
        if self.siblings is not None:
            self.siblings.add_route("GET", "/status", self._part)

    async def _sampling(self, app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(self.window.run(), name="status-sampler")
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def page(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self._page, content_type="text/html", charset="utf-8", headers=_PAGE_HEADERS
        )

    async def status(self, request: web.Request) -> web.Response:
        principal_of(request.app[AUTHENTICATOR], request)
        own = await self.own_part()
        workers: list[tuple[int, str, WorkerPart | None]] = [(own.worker, str(own.pid), own)]
        # The supervisor's share: the in-process consumers it runs (proxy.web.status.supervisor).
        supervisor: list[WorkerPart] = []
        if self.siblings is not None:
            for answer in await self.siblings.ask_all("/status"):
                workers.append((answer.worker, answer.pid, _part_of(answer.body)))
            share = await self.siblings.ask_supervisor("/status")
            if share is not None and (part := _part_of(share[1])) is not None:
                supervisor.append(part)
        report = status_report(
            sorted(workers, key=lambda w: w[0]), self.destinations(), own.worker, supervisor
        )
        return web.Response(
            body=dumps(report),
            content_type="application/json",
            headers={"Cache-Control": "no-store"},
        )

    async def own_part(self) -> WorkerPart:
        """This process's share of the figures."""
        destinations = self.destinations()
        now, growth, seconds = self.window.now_and_growth()
        return WorkerPart(
            worker=0 if self.siblings is None else self.siblings.slot.index,
            pid=os.getpid(),
            uptime_seconds=round(time.monotonic() - self.started, 1),
            now=now,
            growth=growth,
            seconds=seconds,
            health=await self._health_of(destinations),
            rejections=self.recent.newest_first(),
        )

    async def _part(self, request: web.Request) -> web.Response:
        """``GET /status`` on the private socket: this worker's share, for a sibling."""
        return web.Response(body=dumps((await self.own_part()).as_json()))

    async def _health_of(self, destinations: Sequence[Destination]) -> dict[str, Health]:
        which = tuple(id(d) for d in destinations)
        now = time.monotonic()
        if (
            self._health is None
            or self._health[1] != which
            or now - self._health[0] > _HEALTH_SECONDS
        ):
            self._health = (now, which, await destination_health(destinations))
        return self._health[2]


def _part_of(body: bytes | None) -> WorkerPart | None:
    """A sibling's share, or None if it did not answer or its answer cannot be read
    (that worker is shown down; the page still works)."""
    if body is None:
        return None
    try:
        return WorkerPart.from_json(loads(body))
    except (ValueError, KeyError, TypeError):
        log.warning("a sibling's status share could not be read", exc_info=True)
        return None
