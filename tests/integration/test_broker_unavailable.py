"""When Kafka cannot confirm an event the client must hear "retry", never a false 2xx."""

from __future__ import annotations

import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from proxy.app import create_app, server_options
from proxy.embedded_broker import free_port
from tests.conftest import proxy_config
from tests.sample_events import run_event

pytestmark = pytest.mark.integration


async def test_broker_down_without_spool_returns_503_with_retry_after_and_unready():
    config = proxy_config(
        f"127.0.0.1:{free_port()}",
        "unreachable",
        kafka={
            "create_topics": False,
            "producer": {"delivery.timeout.ms": 1000},
            "spool": {"enabled": False},
        },
        server={"retry_after_seconds": 7},
    )
    server = TestServer(create_app(config), host="127.0.0.1")
    await server.start_server(**server_options(config))
    try:
        async with ClientSession() as session:
            url = str(server.make_url("/api/v1/lineage"))
            resp = await session.post(url, data=orjson.dumps(run_event()))
            body = await resp.json()
            assert resp.status == 503
            assert resp.headers["Retry-After"] == "7"
            assert "retry" in body["error"]

            batch = await session.post(url + "/batch", data=orjson.dumps([run_event()] * 2))
            summary = (await batch.json())["summary"]
            assert batch.status == 503 and summary["retriable"] == 2

            ready = await session.get(str(server.make_url("/readyz")))
            assert ready.status == 503
            assert (await ready.json())["destinations"] == {"kafka": False, "archive": True}
    finally:
        await server.close()
