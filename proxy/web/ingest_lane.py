"""The ingest fast lane: ``POST /api/v1/lineage`` and ``…/batch`` without aiohttp's
application dispatch.

Per request, ``Application._handle`` resolves the route, builds and freezes a match
info, looks up the middleware chain and runs it with aiohttp's own middleware that sets
``request.app``: several µs of CPU on the event loop, which single-event ingest is bound
by. The lane replaces the server's request handler (what every connection calls per
request) with a dispatcher: a ``POST`` to exactly one of the plain ingest URLs, without
an ``Expect`` header, goes straight to its route's handler inside the app's middleware;
everything else — other URLs and methods (405s included), ``Expect: 100-continue``
(curl sends it for bodies over 1 KiB), any prefix — takes aiohttp's dispatch as before.

How the handlers still find ``request.app`` (the choice with the least private API):
each plain route gets one match info, built once at start-up the way aiohttp's router
builds it (``UrlMappingMatchInfo`` for the route, the app added, then frozen), and the
lane sets it on each request as ``Application._handle`` does. The request a handler
sees is then the one the slow path gives it: ``request.app``, ``request.match_info``
(its route's name is the metrics label) and the app's ``on_response_prepare`` signals
all work. The only private name touched is ``Request._match_info``, the attribute
aiohttp's own dispatch and its test utilities (``make_mocked_request``) set. The shared
match info is never mutated: ``freeze()`` makes ``add_app`` refuse, and the one setter
left (``current_app``) is used only by aiohttp's own middleware, which the lane does
not run and the slow path runs on match infos of its own. The alternative, handlers
that do not read ``request.app``, would leave ``request.app`` and ``request.match_info``
failing on lane requests only, for any code that reads them now or later, and would
still need the route's name for the metrics label. The slow path is whatever handler
the server had (aiohttp's dispatch), kept as it was: no private name of its is called.

What the lane does not repeat is checked once, at start-up: the app must have exactly
one middleware, of the new style (it is called as aiohttp calls it), and each plain URL
a plain route with a ``POST`` handler (as the router would find it: a plain resource's
path is compared with the request's ``rel_url.path_safe``, as here).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import cast

from aiohttp import hdrs, web

__all__ = ["IngestLane", "install_ingest_lane"]

_Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


def _frozen_match_info(app: web.Application, path: str) -> web.UrlMappingMatchInfo:
    """The match info the router would give a ``POST`` to ``path``, built once."""
    for resource in app.router.resources():
        if isinstance(resource, web.PlainResource) and resource.canonical == path:
            for route in resource:
                if route.method == hdrs.METH_POST:
                    match_info = web.UrlMappingMatchInfo({}, route)
                    match_info.add_app(app)
                    match_info.freeze()
                    return match_info
    raise ValueError(f"ingest lane: no plain POST route for {path}")


class IngestLane:
    """The server's request handler: plain ingest ``POST`` s straight to their handler,
    everything else to ``slow`` (aiohttp's dispatch)."""

    __slots__ = ("_middleware", "_routes", "_slow")

    def __init__(self, app: web.Application, paths: Iterable[str], slow: _Handler) -> None:
        middlewares = list(app.middlewares)
        if len(middlewares) != 1 or getattr(middlewares[0], "__middleware_version__", 0) != 1:
            raise ValueError("ingest lane: the app must have exactly one new-style middleware")
        self._middleware = middlewares[0]
        self._routes = {path: _frozen_match_info(app, path) for path in paths}
        self._slow = slow

    async def __call__(self, base: web.BaseRequest) -> web.StreamResponse:
        # The server's request factory is the app's: every request is a web.Request.
        request = cast(web.Request, base)
        if request.method == hdrs.METH_POST and hdrs.EXPECT not in request.headers:
            match_info = self._routes.get(request.rel_url.path_safe)
            if match_info is not None:
                request._match_info = match_info
                return await self._middleware(request, match_info.handler)
        return await self._slow(request)


def install_ingest_lane(runner: web.AppRunner, paths: Iterable[str]) -> None:
    """Put the lane in front of ``runner``'s server for ``paths``. Call it after
    ``runner.setup()`` and before any site starts: each connection copies the server's
    request handler when it is made."""
    server = runner.server
    if server is None:
        raise RuntimeError("ingest lane: the runner is not set up")
    server.request_handler = IngestLane(runner.app, paths, server.request_handler)
