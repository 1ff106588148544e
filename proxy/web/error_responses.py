"""The error shape of proxy/support/request_errors.py as aiohttp responses (the web layer's
side)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from proxy.support.request_errors import RequestError, error_body

__all__ = ["error_response", "response_of"]


def error_response(
    status: int,
    error: str,
    details: list[dict[str, Any]] | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    reason: str = "bad_request",
) -> web.Response:
    return web.Response(
        status=status,
        body=error_body(error, reason, details),
        content_type="application/json",
        headers=headers,
    )


def response_of(error: RequestError) -> web.Response:
    """The response a raised :class:`RequestError` answers with."""
    return error_response(
        error.status, error.error, error.details, headers=error.headers, reason=error.reason
    )
