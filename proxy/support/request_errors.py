"""The one error shape every 4xx/5xx of the proxy answers with.

``{"error": "...", "reason": "invalid", "details": [{"pointer": "/run/runId", "message":
"..."}]}`` — the pointer is an RFC 6901 JSON pointer into the request body, so a client
author can find the field without reading our logs; ``reason`` is a short stable label a
client can branch on. Neither ever carries file paths or exception text: those go to the
log only. Nothing here speaks HTTP: the web layer turns these into responses
(proxy/web/error_responses.py), so the ingest path and auth raise them without importing
the web server.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from proxy.support.logs import REQUEST_ID

__all__ = ["ClientFault", "RequestError", "detail", "error_body"]


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
        event: Any = None,
    ) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.details = [dict(d) for d in details]
        self.headers = dict(headers or {})
        # Short machine label for metrics (rejected_total{reason=...}) and for clients.
        self.reason = reason
        # The refused event when it was read: who sent it (producer, job) is logged and
        # shown on the status page, never the event itself.
        self.event = event


class ClientFault(RequestError):
    """The client broke the exchange itself (left mid-body, sent too slowly, bad framing).

    Counted as ``client_errors_total{kind=reason}`` and logged at a limited rate, never
    as an error of ours: one client must not be able to flood the log or the metrics.
    """


def error_body(error: str, reason: str, details: list[dict[str, Any]] | None = None) -> bytes:
    """The error document; with ``request_id`` when it is written for a request."""
    body: dict[str, Any] = {"error": error, "reason": reason}
    request_id = REQUEST_ID.get()
    if request_id is not None:
        body["request_id"] = request_id
    body["details"] = details or []
    return orjson.dumps(body)
