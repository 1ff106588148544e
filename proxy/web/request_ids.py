"""Request ids: one per HTTP request, in the ``X-Request-Id`` response header, in error
bodies and on every log line written while the request is handled.

A client (or a gateway in front) may send its own ``X-Request-Id``; it is kept when it
is short and made of safe characters (it goes into logs and headers verbatim), otherwise
the proxy makes one: a random per-process prefix and a counter, which costs far less
than a uuid per request on the ingest path. The id lives in the ``REQUEST_ID`` context
variable of :mod:`proxy.support.logs` for the request's duration.
"""

from __future__ import annotations

import itertools
import os
import re

from aiohttp import web

from proxy.support.logs import REQUEST_ID

__all__ = ["HEADER", "bind", "new_request_id", "sane_request_id"]

HEADER = "X-Request-Id"
MAX_LENGTH = 128
_SAFE = re.compile(rf"[A-Za-z0-9._:@/+=\-]{{1,{MAX_LENGTH}}}")

# Unique across processes (random) and within one (counter).
_PREFIX = os.urandom(6).hex()
_COUNTER = itertools.count(1)


def new_request_id() -> str:
    return f"{_PREFIX}-{next(_COUNTER):x}"


def sane_request_id(value: str | None) -> str | None:
    """``value`` if it may be echoed into logs and headers as it is, else None."""
    if value is not None and _SAFE.fullmatch(value):
        return value
    return None


def bind(request: web.Request) -> str:
    """The request's id (the client's if sane, else a new one), made current for the
    request's log lines and error bodies.

    Nothing to undo: aiohttp handles each request in a task of its own, which runs in a
    copy of the context, so the id ends with the request."""
    request_id = sane_request_id(request.headers.get(HEADER)) or new_request_id()
    REQUEST_ID.set(request_id)
    return request_id
