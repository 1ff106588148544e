"""``GET /openapi.json``: an OpenAPI 3.1 description of the proxy's HTTP endpoints.

The paths are the app's own routes (so a route a config switches off is not listed),
each described by the operation of its route name in ``_OPERATIONS``; a route without
one is listed with ``x-undocumented: true``. The bodies are described by the pydantic
models below, whose JSON Schemas become the document's ``components``; the answers
themselves are built in :mod:`proxy.support.request_errors` (every 4xx/5xx),
:mod:`proxy.web.lineage_endpoints` and :mod:`proxy.web.app`. A test drives a real proxy and
validates its answers against this document, and fails on an undescribed route — a
body or a route that drifts from its description fails it.

The OpenLineage event itself is not redescribed here: it is the spec's (2-0-2), linked.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

import orjson
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import models_json_schema

from proxy import __version__

__all__ = ["endpoint_of", "openapi_document", "serve_openapi"]

SPEC_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json"


class _Body(BaseModel):
    # A field we send but do not describe fails the test (additionalProperties: false).
    model_config = ConfigDict(extra="forbid")


class Detail(_Body):
    pointer: str = Field(description="RFC 6901 JSON pointer into the request body")
    message: str


class ErrorBody(_Body):
    """Every 4xx/5xx of the proxy (but a batch's own summary answers)."""

    error: str = Field(description="one line for a human")
    reason: str = Field(description="short stable label to branch on, e.g. invalid, too_large")
    request_id: str | None = Field(None, description="also the X-Request-Id header")
    details: list[Detail]


class Repair(_Body):
    repair: str = Field(description="which repair (validation.repairs in config.yaml)")
    pointer: str
    from_: Any = Field(alias="from")
    to: Any


class EventAccepted(_Body):
    status: Literal["success"]
    repaired: list[Repair] | None = Field(None, description="stored, but not as sent")


class BatchSummary(_Body):
    received: int
    successful: int
    failed: int
    retriable: int
    non_retriable: int


class FailedEvent(_Body):
    index: int
    reason: str
    retriable: bool
    status: int = Field(description="what a single POST of this event would have answered")
    details: list[Detail]


class RepairedEvent(_Body):
    index: int
    repairs: list[Repair]


class BatchAnswer(_Body):
    status: Literal["success", "partial_success", "failure"]
    error: str | None = Field(None, description="with status failure: why nothing was stored")
    request_id: str | None = Field(None, description="with status failure")
    summary: BatchSummary
    failed_events: list[FailedEvent]
    repaired_events: list[RepairedEvent] | None = None


class Health(_Body):
    status: Literal["ok"]


class Readiness(_Body):
    ready: bool
    status: Literal["ready", "degraded", "not_ready"] = Field(
        description="degraded: ready (events are taken durably), but something is wrong"
    )
    problems: list[str] = Field(description="what is wrong, and what to do, in words")
    destinations: dict[str, bool] = Field(description="durable destination → ready")
    details: dict[str, Any] | None = Field(None, description="e.g. a Kafka destination spooling")


_MODELS: list[type[BaseModel]] = [ErrorBody, EventAccepted, BatchAnswer, Health, Readiness]

# A token when auth is on (config.yaml auth:), none otherwise.
_SECURED: list[dict[str, list[str]]] = [{}, {"bearer": []}]


def _json(model: type[BaseModel], description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {
            "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}
        },
    }


def _errors(*statuses: int) -> dict[str, Any]:
    meaning = {
        400: "invalid JSON or an event that breaks the spec (pointers in details), or two "
        "Authorization headers (auth on)",
        401: "no or a wrong token (auth on)",
        403: "the token may not send events of a namespace the event names (job, parent, "
        "root; datasets per run_datasets): its pointer in details",
        408: "the body did not arrive in time",
        413: "body, decompressed body, batch or event too large; nothing stored",
        415: "unsupported Content-Encoding",
        422: "a destination refused the event",
        500: "a bug of ours; nothing stored",
        503: "a durable destination is unavailable: retry after Retry-After",
        508: "the event already passed through another proxy (a consumer pointed back at "
        "a proxy): refused so it cannot loop",
    }
    return {str(status): _json(ErrorBody, meaning[status]) for status in statuses}


def _event_body(schema: dict[str, Any], what: str) -> dict[str, Any]:
    return {
        "required": True,
        "description": f"{what}; may be gzip or deflate (Content-Encoding)",
        "content": {"application/json": {"schema": schema}},
    }


_EVENT = {
    "type": "object",
    "description": f"an OpenLineage RunEvent, JobEvent or DatasetEvent ({SPEC_URL})",
}


_LINEAGE_NOTE = "Any path prefix works: clients join api/v1/lineage onto the URL they were given."


def _plain(media_type: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {media_type: {"schema": {"type": "string"}}}}


# Route name (proxy/web/app.py) → its operation. Routes that a config switches off are not
# in the app, hence not in the document; the last three are other modules' routes.
_OPERATIONS: dict[str, dict[str, Any]] = {
    "lineage": {
        "operationId": "postEvent",
        "summary": "Send one event; 200 once every durable destination holds it",
        "description": _LINEAGE_NOTE,
        "security": _SECURED,
        "requestBody": _event_body(_EVENT, "one OpenLineage event"),
        "responses": {
            "200": _json(EventAccepted, "stored (X-Lineage-Spooled: true if spooled)"),
            **_errors(400, 401, 403, 408, 413, 415, 422, 500, 503, 508),
        },
    },
    "lineage_batch": {
        "operationId": "postBatch",
        "summary": "Send a JSON array of events; a summary with per-index failures",
        "description": _LINEAGE_NOTE,
        "security": _SECURED,
        "requestBody": _event_body(
            {"type": "array", "items": _EVENT}, "a JSON array of OpenLineage events"
        ),
        "responses": {
            "200": _json(BatchAnswer, "all or some stored (status says which)"),
            "400": {
                "description": "not an array, bad JSON, or no event was valid",
                "content": {
                    "application/json": {
                        "schema": {
                            "oneOf": [
                                {"$ref": "#/components/schemas/BatchAnswer"},
                                {"$ref": "#/components/schemas/ErrorBody"},
                            ]
                        }
                    }
                },
            },
            "503": _json(BatchAnswer, "nothing stored, retriable: retry after Retry-After"),
            **_errors(401, 403, 408, 413, 415, 500, 508),
        },
    },
    "healthz": {
        "operationId": "health",
        "summary": "Liveness: the process answers",
        "responses": {"200": _json(Health, "alive")},
    },
    "readyz": {
        "operationId": "ready",
        "summary": "Readiness: every durable destination can take events",
        "responses": {
            "200": _json(Readiness, "ready"),
            "503": _json(Readiness, "not ready (destinations says which)"),
        },
    },
    "metrics": {
        "operationId": "metrics",
        "summary": "Prometheus metrics (text exposition format 0.0.4)",
        "responses": {
            "200": _plain("text/plain", "the proxy's metrics and its in-process consumers'")
        },
    },
    "openapi": {
        "operationId": "openapi",
        "summary": "This document",
        "responses": {
            "200": {
                "description": "OpenAPI 3.1",
                "content": {"application/json": {"schema": {"type": "object"}}},
            }
        },
    },
    "status_page": {
        "operationId": "statusPage",
        "summary": "The status page (HTML; reads /api/v1/status)",
        "responses": {"200": _plain("text/html", "the page")},
    },
    "status_page_ui": {
        "operationId": "statusPageUi",
        "summary": "The status page, also at /ui",
        "responses": {"200": _plain("text/html", "the page")},
    },
    "status": {
        "operationId": "status",
        "summary": "Live figures of the proxy, as the status page shows them",
        "security": _SECURED,
        "responses": {
            "200": {
                "description": "figures",
                "content": {"application/json": {"schema": {"type": "object"}}},
            },
            **_errors(401),
        },
    },
    "tap": {
        "operationId": "tap",
        "summary": "Accepted events as Server-Sent Events (lineage-proxy tap)",
        "security": _SECURED,
        "responses": {
            "200": _plain("text/event-stream", "one data: line per event"),
            **_errors(400, 401),
        },
    },
}


def endpoint_of(route: web.AbstractRoute) -> str | None:
    """The endpoint a route serves: its name less a ``.variant`` suffix ("lineage.prefixed"
    is "lineage" under any URL prefix). The operation here and the ``endpoint`` metric
    label both come from it."""
    return None if route.name is None else route.name.partition(".")[0]


def _operation(route: web.AbstractRoute) -> dict[str, Any]:
    operation = _OPERATIONS.get(endpoint_of(route) or "")
    if operation is not None:
        return operation
    # A route nobody described yet: listed, and flagged (the OpenAPI test fails on it).
    return {
        "summary": f"undocumented route {route.name or ''}".strip(),
        "x-undocumented": True,
        "responses": {"default": {"description": "not described yet"}},
    }


def _paths(app: web.Application) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for route in app.router.routes():
        if route.method == "HEAD":  # aiohttp adds one to each GET
            continue
        # The lineage routes take any prefix ("{prefix}"): described in words instead.
        path = route.resource.canonical.replace("/{prefix}", "/", 1) if route.resource else "/"
        paths.setdefault(path, {})[route.method.lower()] = _operation(route)
    return paths


@cache
def _schemas() -> dict[str, Any]:
    _, schemas = models_json_schema(
        [(model, "serialization") for model in _MODELS],
        ref_template="#/components/schemas/{model}",
    )
    return dict(schemas["$defs"])


def openapi_document(app: web.Application) -> dict[str, Any]:
    """The document for ``app``: its routes, each with its operation."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "lineage-proxy",
            "version": __version__,
            "description": "Proxy and router for OpenLineage events, backed by Kafka. "
            "Every answer carries X-Request-Id (a sane one sent by the client is kept).",
        },
        "externalDocs": {"description": "OpenLineage spec 2-0-2", "url": SPEC_URL},
        "paths": _paths(app),
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


async def serve_openapi(request: web.Request) -> web.Response:
    return web.Response(
        body=orjson.dumps(openapi_document(request.app)), content_type="application/json"
    )
