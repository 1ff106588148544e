"""``GET /openapi.json`` describes the real server: the same routes as the app, and every
answer a real proxy gives (statuses and bodies, errors included) fits its description."""

from __future__ import annotations

import gzip
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession, web
from jsonschema import Draft202012Validator

from proxy.web.app import create_app
from proxy.web.openapi import openapi_document
from tests.support.proxies import proxy_config
from tests.support.sample_events import run_event

pytestmark = pytest.mark.integration

TOKEN = "openapi-token"
AUTH = {"enabled": True, "tokens": [{"name": "team-a", "token": TOKEN, "namespaces": ["team-a*"]}]}


def _app_routes(app: web.Application) -> set[tuple[str, str]]:
    """(METHOD, path) of every route; the lineage routes' any-prefix part left out, as the
    document states it in words."""
    return {
        (route.method, route.resource.canonical.replace("/{prefix}", "/", 1))
        for route in app.router.routes()
        if route.method != "HEAD" and route.resource is not None  # HEAD: added to each GET
    }


def _documented_routes(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
    }


def test_the_document_is_openapi_3_1_naming_exactly_the_routes_the_app_has(broker, topic):
    app = create_app(proxy_config(broker.bootstrap_servers, topic))
    document = openapi_document(app)
    assert document["openapi"].startswith("3.1")
    assert document["info"]["title"] and document["info"]["version"]
    assert _documented_routes(document) == _app_routes(app)
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert "x-undocumented" not in operation, f"{method} {path} is not described"
            assert operation["responses"] and operation["summary"], path
    for name, schema in document["components"]["schemas"].items():
        assert Draft202012Validator.check_schema(schema) is None, name


def test_a_route_nobody_described_is_listed_and_flagged():
    async def handler(request: web.Request) -> web.Response:
        return web.Response()

    app = web.Application()
    app.router.add_get("/healthz", handler, name="healthz")
    app.router.add_get("/new/thing", handler)
    paths = openapi_document(app)["paths"]
    assert "x-undocumented" not in paths["/healthz"]["get"]
    assert paths["/new/thing"]["get"]["x-undocumented"] is True


def _check(document: dict[str, Any], answers: list[tuple[str, str, int, str, Any]]) -> None:
    """Each (path, method, status, content type, body) is a documented response of its
    operation and its body validates against the documented schema."""
    for path, method, status, content_type, body in answers:
        responses = document["paths"][path][method]["responses"]
        assert str(status) in responses, f"{method} {path}: {status} is not documented"
        content = responses[str(status)]["content"]
        assert content_type in content, f"{method} {path} {status}: {content_type}"
        schema = {"components": document["components"], **content[content_type]["schema"]}
        errors = list(Draft202012Validator(schema).iter_errors(body))
        assert not errors, f"{method} {path} {status}: {[e.message for e in errors]}"


async def test_every_answer_of_a_real_proxy_fits_the_document(start_proxy):
    good = run_event()
    invalid = run_event()
    del invalid["run"]["runId"]
    repaired = run_event()
    repaired["eventTime"] = "2026-11-23T10:00:00"  # naive: repaired (UTC assumed)
    forbidden = run_event(namespace="team-b")
    answers: list[tuple[str, str, int, str, Any]] = []
    server = {"max_batch_events": 5}
    async with start_proxy(auth=AUTH, server=server) as url, ClientSession() as session:

        async def call(path: str, method: str = "get", body: Any = None, **headers: str) -> None:
            headers = {"Authorization": f"Bearer {TOKEN}", **headers}
            data = body if isinstance(body, bytes) or body is None else orjson.dumps(body)
            async with session.request(method, url + path, data=data, headers=headers) as r:
                content_type = r.content_type
                raw = await r.read()
                assert r.headers["X-Request-Id"]
            parsed = orjson.loads(raw) if content_type == "application/json" else raw.decode()
            answers.append((path, method, r.status, content_type, parsed))

        single, batch = "/api/v1/lineage", "/api/v1/lineage/batch"
        for path in ("/healthz", "/readyz", "/metrics", "/openapi.json"):
            await call(path)
        await call(single, "post", good)
        await call(single, "post", repaired)
        await call(single, "post", invalid)
        await call(single, "post", b"{not json")
        await call(single, "post", forbidden)
        await call(single, "post", good, Authorization="Bearer wrong")
        await call(single, "post", gzip.compress(b"{}"), **{"Content-Encoding": "br"})
        await call(batch, "post", [good, repaired])
        await call(batch, "post", [good, invalid])
        await call(batch, "post", [invalid, invalid])
        await call(batch, "post", {"not": "an array"})
        await call(batch, "post", [good] * 6)
    statuses = {(path, status) for path, _, status, _, _ in answers}
    assert {(single, s) for s in (200, 400, 401, 403, 415)} <= statuses
    assert {(batch, s) for s in (200, 400, 413)} <= statuses
    document = answers[3][4]  # what /openapi.json served
    assert _documented_routes(document) >= {("POST", single), ("POST", batch)}
    assert any(body.get("repaired") for p, _, s, _, body in answers if (p, s) == (single, 200))
    _check(document, answers)
