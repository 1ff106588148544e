"""``GET /api/v1/tap``: accepted events as Server-Sent Events, for ``lineage-proxy tap``.

Query parameters filter the stream: ``rule`` (a rule name, ``(default)`` for the default
route), ``namespace`` and ``job`` (globs), ``eventType``. When auth is on the request
needs a Bearer token, and a token sees only events of namespaces it may post for.

The stream: a ``: tap open`` comment first (the subscription exists from then on, on
every worker of ``serve --workers N``), then
one ``data:`` line per event (JSON: time, rules, destinations, dropped_by, event), a
``: keep-alive`` comment when nothing happened for a while, and ``event: dropped`` with
``{"dropped": N}`` (N counted since the stream opened) when the reader fell behind and
events were left out for it. The server ends the stream when it shuts down, and cuts
off a reader that stopped reading while the queue budget is short (:mod:`proxy.tap.hub`).

A reader that leaves is ordinary (Ctrl-C, ``tap | head``): it is logged as one line at
most every few seconds, without a traceback, whether it left between events or while
its stream was being written (the write then fails with a ``ConnectionError`` that is
not always a ``ConnectionResetError``).
"""

from __future__ import annotations

import asyncio
import datetime
import logging

from aiohttp import web

from proxy.support.request_errors import RequestError, detail
from proxy.support.throttled_log import ThrottledLog
from proxy.tap.hub import TapFilter, TappedEvent
from proxy.validation.exact_json import dumps
from proxy.web.keys import AUTHENTICATOR, TAP
from proxy.web.principal import principal_of

__all__ = ["get_tap"]

log = logging.getLogger(__name__)
_left = ThrottledLog(log)


# A comment this often keeps proxies from closing an idle stream and finds readers gone.
_KEEP_ALIVE_SECONDS = 10.0
_QUERY = {"rule": "rule", "namespace": "namespace", "eventType": "event_type", "job": "job"}


def _tap_filter(request: web.Request) -> TapFilter:
    unknown = sorted(set(request.query) - set(_QUERY))
    if unknown:
        raise RequestError(
            400,
            f"unknown tap parameter {unknown[0]!r}; known: {', '.join(_QUERY)}",
            [detail("", f"query parameter {unknown[0]!r}")],
            reason="invalid",
        )
    return TapFilter(**{_QUERY[k]: v for k, v in request.query.items() if v})


def _frame(tapped: TappedEvent) -> bytes:
    when = datetime.datetime.fromtimestamp(tapped.time, datetime.UTC)
    record = {
        "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "rules": list(tapped.rules),
        "destinations": list(tapped.destinations),
        "dropped_by": tapped.dropped_by,
        "event": tapped.event,
    }
    return b"data: " + dumps(record) + b"\n\n"


async def get_tap(request: web.Request) -> web.StreamResponse:
    principal = principal_of(request.app[AUTHENTICATOR], request)
    tap_filter = _tap_filter(request)
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",  # nginx: pass events through unbuffered
        }
    )
    hub = request.app[TAP]
    with hub.subscribe(tap_filter, principal) as subscription:
        await hub.joined()  # with workers: the others forward their events from now on
        await response.prepare(request)
        transport = request.transport
        if transport is not None:
            subscription.abort = transport.abort
        reported = 0
        try:
            await response.write(b": tap open\n\n")
            while True:
                try:
                    tapped = await asyncio.wait_for(subscription.next(), _KEEP_ALIVE_SECONDS)
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                if subscription.dropped > reported:
                    reported = subscription.dropped
                    await response.write(
                        b"event: dropped\ndata: " + dumps({"dropped": reported}) + b"\n\n"
                    )
                if tapped is None:
                    break
                await response.write(_frame(tapped))
        except ConnectionError as exc:
            if not subscription.cut_off:  # the hub logged that one
                _left.info("left", "tap reader %s left (%s)", request.remote, _why(exc))
    return response


def _why(error: ConnectionError) -> str:
    return str(error) or type(error).__name__
