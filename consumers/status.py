"""A daemon's own small HTTP server: ``/metrics`` (Prometheus) and ``/healthz``."""

from __future__ import annotations

from aiohttp import web

from consumers.daemon import ConsumerDaemon

__all__ = ["status_app"]

DAEMON = web.AppKey("daemon", ConsumerDaemon)


async def _metrics(request: web.Request) -> web.Response:
    return web.Response(
        body=request.app[DAEMON].metrics.exposition(),
        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
    )


async def _healthz(request: web.Request) -> web.Response:
    alive, details = request.app[DAEMON].health()
    return web.json_response(details, status=200 if alive else 503)


def status_app(daemon: ConsumerDaemon) -> web.Application:
    app = web.Application()
    app[DAEMON] = daemon
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/healthz", _healthz)
    return app
