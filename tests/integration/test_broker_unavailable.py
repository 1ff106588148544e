"""When Kafka cannot confirm an event the client must hear "retry", never a false 2xx."""

from __future__ import annotations

import orjson
import pytest
from aiohttp import ClientSession

from proxy.server.serve import serving
from proxy.web.app import create_app
from tests.support.paths import ARCHIVE_ROOT
from tests.support.ports import free_port
from tests.support.proxies import proxy_config
from tests.support.sample_events import run_event

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
        server={"retry_after_seconds": 7, "port": 0},
    )
    async with serving(create_app(config)) as port, ClientSession() as session:
        url = f"http://127.0.0.1:{port}/api/v1/lineage"
        resp = await session.post(url, data=orjson.dumps(run_event()))
        raw = await resp.read()
        body = orjson.loads(raw)
        assert resp.status == 503
        assert resp.headers["Retry-After"] == "7"
        assert "retry" in body["error"]
        assert body["reason"] == "unavailable"
        # Internals stay in the log: no file path, no exception or librdkafka text.
        for leak in (str(ARCHIVE_ROOT), "/", "Error", "Local:", "timed out", "Exception"):
            assert leak not in body["error"], body

        batch = await session.post(url + "/batch", data=orjson.dumps([run_event()] * 2))
        batch_body = await batch.json()
        assert batch.status == 503 and batch_body["summary"]["retriable"] == 2
        assert all("/" not in f["reason"] for f in batch_body["failed_events"])

        ready = await session.get(f"http://127.0.0.1:{port}/readyz")
        assert ready.status == 503
        assert (await ready.json())["destinations"] == {
            "kafka": False,
            "archive": True,
            "rejected": False,
            "rejected_archive": True,
        }
