"""The one error shape every 4xx/5xx of the proxy answers with.

``{"error": "...", "details": [{"pointer": "/run/runId", "message": "..."}]}`` — the
pointer is an RFC 6901 JSON pointer into the request body, so a client author can find
the field without reading our logs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from aiohttp import web

__all__ = ["RequestError", "detail", "error_response"]


def detail(pointer: str, message: str) -> dict[str, str]:
    return {"pointer": pointer, "message": message}


class RequestError(Exception):
    """Raised anywhere in request handling; turned into a JSON error response."""

    def __init__(
        self,
        status: int,
        error: str,
        details: Iterable[Mapping[str, str]] = (),
        *,
        headers: Mapping[str, str] | None = None,
        reason: str = "bad_request",
    ) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.details = [dict(d) for d in details]
        self.headers = dict(headers or {})
        # Short machine label for metrics (rejected_total{reason=...}).
        self.reason = reason

    def response(self) -> web.Response:
        return error_response(self.status, self.error, self.details, headers=self.headers)


def error_response(
    status: int,
    error: str,
    details: list[dict[str, Any]] | None = None,
    *,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    body = {"error": error, "details": details or []}
    return web.Response(
        status=status,
        body=orjson.dumps(body),
        content_type="application/json",
        headers=headers,
    )
