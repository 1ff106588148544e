"""A double of Marquez's lineage API, reproducing its documented answers.

- ``POST /api/v1/lineage`` → 201, empty body, after "the DB write" (the event is kept).
- 422 with ``{"errors": [...]}`` when a required field (eventTime, producer, schemaURL,
  run.runId, job.namespace, job.name) is missing or null.
- An ``eventTime`` that is no date-time (``2026-11-23``) → HTTP **500** with body
  ``{"code":400,"message":"Cannot deserialize value of type `java.time.ZonedDateTime` …"}``.
- A body not sent as ``Content-Type: application/json`` → 415 (its JAX-RS resource
  consumes JSON only; Dropwizard's ``{"code":415,"message":"HTTP 415 Unsupported Media
  Type"}``), before the body is read.
- Malformed JSON → HTTP **500** with body ``{"code":400,"message":"Unable to process JSON"}``.
- A JobEvent (no ``run``) with a dataset that carries ``inputFacets`` or ``outputFacets``
  (openlineage-python always sends both, even empty) → HTTP **500** with Jetty's HTML
  error page: Marquez 0.50 stores the raw event in ``lineage_events`` and then fails on the
  missing ``runUuid`` (NullPointerException). The raw rows land in ``.raw_rows``, one per
  attempt, never in ``.events``. Any other JobEvent → 201, like a RunEvent.
- A NUL character (``\\u0000``) in any string → HTTP **500** with the same HTML page:
  PostgreSQL refuses it in ``jsonb`` and nothing is stored (issue 36).
- Accepted (201), as the real Marquez 0.50.0 accepts them: a ``runId`` that is not a UUID,
  an unknown ``eventType``, an ``eventTime`` without UTC offset.

These answers were checked against the real Marquez 0.50.0
(tests/integration/marquez/test_double_matches_real_marquez.py).
- No idempotency: the same event posted twice is stored twice (``.events`` shows it).
- ``GET /api/v1/events/lineage?limit=N`` → ``{"events": [...]}``, newest first.
- ``GET /api/v1/namespaces?limit=N`` → ``{"namespaces": [...]}`` (the target adapter's
  health check; it fails during an outage like the lineage endpoint).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
from aiohttp import web

from tests.support.doubles.target_double import TargetDouble

__all__ = ["MarquezDouble"]

_REQUIRED = (
    ("eventTime",),
    ("producer",),
    ("schemaURL",),
    ("run", "runId"),
    ("job", "namespace"),
    ("job", "name"),
)
_ERROR = "There was an error processing your request. It has been logged (ID 5f1c0e2a9b7d3c41)."


def _server_error() -> web.Response:
    """What Marquez 0.50's Jetty answers to an exception it did not map: an HTML page."""
    page = f"<html><body><h2>HTTP ERROR 500 Internal Server Error</h2>{_ERROR}</body></html>"
    return web.Response(status=500, text=page, content_type="text/html")


def _run_facets_on_datasets(event: dict[str, Any]) -> bool:
    for side, key in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
        datasets = event.get(side)
        if isinstance(datasets, list) and any(isinstance(d, dict) and key in d for d in datasets):
            return True
    return False


def _has_nul(document: Any) -> bool:
    if isinstance(document, str):
        return "\x00" in document
    if isinstance(document, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in document.items())
    if isinstance(document, list):
        return any(_has_nul(v) for v in document)
    return False


def _is_date_time(value: Any) -> bool:
    if not isinstance(value, str) or "T" not in value:
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _get(document: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        document = document.get(part) if isinstance(document, dict) else None
    return document


class MarquezDouble(TargetDouble):
    health_path = "/api/v1/namespaces"

    def __init__(self) -> None:
        super().__init__()
        self.raw_rows: list[dict[str, Any]] = []  # lineage_events rows of failed events

    async def healthy_answer(self, request: web.Request) -> web.Response:
        names = sorted({e["job"]["namespace"] for e in self.events if "job" in e})
        return web.json_response({"namespaces": [{"name": n} for n in names]})

    def add_routes(self, app: web.Application) -> None:
        super().add_routes(app)
        app.router.add_get("/api/v1/events/lineage", self._list_events)

    async def answer(self, request: web.Request, body: bytes) -> web.Response:
        if request.content_type != "application/json":
            return web.json_response(
                {"code": 415, "message": "HTTP 415 Unsupported Media Type"}, status=415
            )
        try:
            event = orjson.loads(body)
        except orjson.JSONDecodeError:
            return web.json_response({"code": 400, "message": "Unable to process JSON"}, status=500)
        if not isinstance(event, dict):
            return web.json_response({"code": 400, "message": "Unable to process JSON"}, status=500)
        if _has_nul(event):
            return _server_error()
        required = [p for p in _REQUIRED if "run" in event or p[0] != "run"]
        missing = [".".join(p) for p in required if _get(event, p) is None]
        if missing:
            errors = [f"{name} must not be null" for name in missing]
            return web.json_response({"errors": errors}, status=422)
        if not _is_date_time(event["eventTime"]):
            message = "Cannot deserialize value of type `java.time.ZonedDateTime`"
            return web.json_response({"code": 400, "message": message}, status=500)
        if "run" not in event and "job" in event and _run_facets_on_datasets(event):
            self.raw_rows.append(event)  # stored raw, then the runUuid NPE
            return _server_error()
        self.events.append(event)
        return web.Response(status=201)

    async def _list_events(self, request: web.Request) -> web.Response:
        limit = int(request.query.get("limit", "100"))
        return web.json_response({"events": list(reversed(self.events))[:limit]})
