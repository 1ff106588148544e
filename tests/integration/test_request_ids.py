"""Every answer of a real proxy carries ``X-Request-Id``; error bodies and the log line
about a refused request carry the same id."""

from __future__ import annotations

import logging

import orjson
import pytest
from aiohttp import ClientSession

from tests.support.sample_events import run_event

pytestmark = pytest.mark.integration


async def test_a_sane_client_request_id_is_echoed_and_an_unsafe_one_replaced(start_proxy):
    async with start_proxy() as url, ClientSession() as session:
        async with session.post(
            f"{url}/api/v1/lineage",
            data=orjson.dumps(run_event()),
            headers={"X-Request-Id": "ci-7"},
        ) as response:
            assert response.status == 200
            assert response.headers["X-Request-Id"] == "ci-7"
        async with session.get(f"{url}/healthz", headers={"X-Request-Id": "bad id\t!"}) as response:
            assert response.status == 200
            made = response.headers["X-Request-Id"]
            assert made and made != "bad id\t!"
        async with session.get(f"{url}/readyz") as first, session.get(f"{url}/readyz") as second:
            assert first.headers["X-Request-Id"] != second.headers["X-Request-Id"]


async def test_error_bodies_carry_the_request_id_of_the_response(start_proxy, caplog):
    caplog.set_level(logging.WARNING, logger="proxy.web.client_faults")
    async with start_proxy() as url, ClientSession() as session:
        bad = run_event()
        del bad["run"]["runId"]
        async with session.post(
            f"{url}/api/v1/lineage", data=orjson.dumps(bad), headers={"X-Request-Id": "bad-1"}
        ) as response:
            assert response.status == 400
            body = await response.json()
            assert body["request_id"] == response.headers["X-Request-Id"] == "bad-1"
        async with session.get(f"{url}/no/such/page") as response:
            assert response.status == 404
            body = await response.json()
            assert body["request_id"] == response.headers["X-Request-Id"]
        async with session.post(f"{url}/api/v1/lineage/batch", data=b"[") as response:
            assert response.status == 400
            assert (await response.json())["request_id"] == response.headers["X-Request-Id"]
    refusals = [r for r in caplog.records if r.getMessage().startswith("refused 400 invalid")]
    assert refusals and "request id 'bad-1'" in refusals[0].getMessage()
