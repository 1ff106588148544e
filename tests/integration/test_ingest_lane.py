"""The ingest lane (proxy/web/ingest_lane.py): plain ingest POSTs skip aiohttp's dispatch,
and what the client hears is what the same request hears through that dispatch."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession, web
from multidict import CIMultiDict

from tests.integration.test_lineage_endpoint import AUTH
from tests.integration.test_misbehaving_clients import connect, metric
from tests.support.sample_events import run_event

pytestmark = pytest.mark.integration

SINGLE = "/api/v1/lineage"
# The same handler through a regex route: found by aiohttp's router, never by the lane.
PREFIXED = "/through/the/router/api/v1/lineage"

Answer = tuple[int, bytes, CIMultiDict[str]]


@pytest.fixture
def dispatched(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``METHOD path`` of every request that went through ``Application._handle``
    (aiohttp's dispatch) of a proxy started after this fixture."""
    seen: list[str] = []
    handle: Callable[[web.Application, web.Request], Awaitable[web.StreamResponse]] = (
        web.Application._handle
    )

    async def spy(app: web.Application, request: web.Request) -> web.StreamResponse:
        seen.append(f"{request.method} {request.path}")
        return await handle(app, request)

    monkeypatch.setattr(web.Application, "_handle", spy)
    return seen


async def answer(method: str, url: str, body: bytes = b"", **headers: str) -> Answer:
    """Status, body and headers (but the date) of one request."""
    async with (
        ClientSession() as session,
        session.request(method, url, data=body, headers=headers) as response,
    ):
        got = await response.read()
        kept = CIMultiDict(response.headers)
        del kept["Date"]
        return response.status, got, kept


async def same_on_both_paths(
    url: str, dispatched: list[str], status: int, path: str, body: bytes, **headers: str
) -> Answer:
    """The answer to a POST on ``path``, which the lane takes: ``status``, counted under
    the endpoint's label, and equal to the answer the same request gets through aiohttp's
    dispatch (a prefixed URL: same handler, same label)."""
    label = "lineage_batch" if path.endswith("/batch") else "lineage"
    prefixed = PREFIXED + path.removeprefix(SINGLE)
    # The same client id both ways: error bodies quote it.
    headers.setdefault("X-Request-Id", "lane-test")
    before = len(dispatched)
    labels = {"endpoint": label, "status": str(status)}
    counted = await metric(url, "lineage_proxy_http_requests_total", **labels)
    lane = await answer("POST", url + path, body, **headers)
    assert lane[0] == status
    assert await metric(url, "lineage_proxy_http_requests_total", **labels) == counted + 1
    router = await answer("POST", url + prefixed, body, **headers)
    assert dispatched[before:] == ["GET /metrics", "GET /metrics", f"POST {prefixed}"]
    assert lane == router
    return lane


def details(body: bytes) -> list[Any]:
    return list(orjson.loads(body)["details"])


async def test_plain_posts_take_the_lane_and_answer_as_aiohttp_dispatch_does(
    start_proxy, dispatched
):
    event = orjson.dumps(run_event())
    invalid = run_event()
    invalid["run"]["runId"] = "not-a-uuid"
    async with start_proxy(server={"max_body_bytes": 10_000}) as url:
        _, _, headers = await same_on_both_paths(url, dispatched, 200, SINGLE, event)
        assert headers["X-Request-Id"] == "lane-test"
        # Without a client id, the lane makes one too.
        status, _, headers = await answer("POST", url + SINGLE, event)
        assert status == 200 and headers["X-Request-Id"]

        _, body, _ = await same_on_both_paths(url, dispatched, 400, SINGLE, orjson.dumps(invalid))
        assert [d["pointer"] for d in details(body)] == ["/run/runId"]

        _, body, _ = await same_on_both_paths(
            url, dispatched, 200, SINGLE, gzip.compress(event), **{"Content-Encoding": "gzip"}
        )
        assert orjson.loads(body) == {"status": "success"}
        await same_on_both_paths(url, dispatched, 415, SINGLE, event, **{"Content-Encoding": "br"})
        await same_on_both_paths(url, dispatched, 413, SINGLE, b" " * 10_001)

        _, body, _ = await same_on_both_paths(
            url, dispatched, 200, SINGLE + "/batch", b"[" + event + b"]"
        )
        assert orjson.loads(body)["summary"]["successful"] == 1

        # Other methods are the router's: 405 from it, on both URLs alike.
        for method in ("GET", "PUT"):
            before = len(dispatched)
            lane = await answer(method, url + SINGLE, b"", **{"X-Request-Id": "lane-test"})
            assert dispatched[before:] == [f"{method} {SINGLE}"]
            assert lane == await answer(
                method, url + PREFIXED, b"", **{"X-Request-Id": "lane-test"}
            )
            assert lane[0] == 405


async def test_an_unauthorized_request_is_refused_on_the_lane_as_elsewhere(start_proxy, dispatched):
    event = orjson.dumps(run_event(namespace="team-a"))
    async with start_proxy(auth=AUTH) as url:
        _, _, headers = await same_on_both_paths(url, dispatched, 401, SINGLE, event)
        assert headers["WWW-Authenticate"].startswith("Bearer")
        await same_on_both_paths(url, dispatched, 401, SINGLE, event, Authorization="Bearer wrong")
        await same_on_both_paths(
            url, dispatched, 200, SINGLE, event, Authorization="Bearer secret-a"
        )


async def test_expect_100_continue_goes_through_aiohttp_dispatch(start_proxy, dispatched):
    """What curl does with a body over 1 KiB: it waits for ``100 Continue`` first."""
    event = orjson.dumps(run_event())
    async with start_proxy() as url:
        reader, writer = await connect(url)
        writer.write(
            f"POST {SINGLE} HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(event)}\r\nExpect: 100-continue\r\n\r\n".encode()
        )
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(event)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        writer.close()
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"X-Request-Id: " in head
    assert dispatched == [f"POST {SINGLE}"]
