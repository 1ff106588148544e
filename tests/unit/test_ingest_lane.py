"""The ingest lane refuses, at start-up, an app whose dispatch it would not reproduce
(proxy/web/ingest_lane.py; its requests are tested on a real proxy in
tests/integration/test_ingest_lane.py)."""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.typedefs import Handler

from proxy.web.ingest_lane import IngestLane, install_ingest_lane

PATH = "/api/v1/lineage"


async def _ok(request: web.Request) -> web.Response:
    return web.Response()


@web.middleware
async def _passing(request: web.Request, handler: Handler) -> web.StreamResponse:
    return await handler(request)


def _app(*middlewares: object) -> web.Application:
    app = web.Application(middlewares=middlewares)  # type: ignore[arg-type]
    app.router.add_post(PATH, _ok, name="lineage")
    app.router.add_get("/healthz", _ok)
    return app


async def _slow(request: web.BaseRequest) -> web.StreamResponse:
    raise AssertionError("not called at start-up")


@pytest.mark.parametrize("middlewares", [(), (_passing, _passing)])
def test_an_app_without_exactly_one_middleware_is_refused(middlewares):
    with pytest.raises(ValueError, match="exactly one new-style middleware"):
        IngestLane(_app(*middlewares), [PATH], _slow)


def test_an_old_style_middleware_is_refused():
    async def old_style(app: web.Application, handler: object) -> object:
        return handler

    with pytest.raises(ValueError, match="new-style"):
        IngestLane(_app(old_style), [PATH], _slow)


@pytest.mark.parametrize("path", ["/healthz", "/nowhere", "/api/v1/{prefix}"])
def test_a_path_without_a_plain_post_route_is_refused(path):
    app = _app(_passing)
    app.router.add_post("/api/v1/{prefix}", _ok)
    with pytest.raises(ValueError, match=f"no plain POST route for {path}"):
        IngestLane(app, [PATH, path], _slow)


def test_installing_on_a_runner_not_set_up_is_refused():
    with pytest.raises(RuntimeError, match="not set up"):
        install_ingest_lane(web.AppRunner(_app(_passing)), [PATH])
