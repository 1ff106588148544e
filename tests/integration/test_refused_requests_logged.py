"""Refused requests (400/401/403/413) are logged, one line per reason per interval, with
the request id, the pointer and the reason — never the payload or the token."""

from __future__ import annotations

import asyncio
import logging

import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import make_mocked_request

from proxy.metrics.process import ProxyMetrics
from proxy.web.client_faults import ClientFaults
from tests.support.sample_events import run_event

pytestmark = pytest.mark.integration

TOKEN = "tok-never-logged-7f3a"
MARKER = "payload-never-logged-91c2"
AUTH = {"enabled": True, "tokens": [{"name": "team-a", "token": TOKEN, "namespaces": ["team-a*"]}]}


def _refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "proxy.web.client_faults" and r.getMessage().startswith("refused")
    ]


async def test_refused_requests_are_logged_once_per_reason_without_payload_or_token(
    start_proxy, caplog
):
    caplog.set_level(logging.INFO)
    invalid = run_event(namespace="team-a")
    invalid["run"]["runId"] = MARKER  # not a UUID: 400 at /run/runId
    forbidden = run_event(namespace="team-b")
    # The job's namespace/name say who sent it and are logged; a value inside never is.
    forbidden["run"]["facets"]["note"] = {
        "_producer": "https://example.com/notes",
        "_schemaURL": "https://example.com/NoteRunFacet.json",
        "text": MARKER,
    }
    url_of: dict[str, str] = {}
    async with start_proxy(auth=AUTH) as url, ClientSession() as session:
        url_of["lineage"] = f"{url}/api/v1/lineage"

        async def post(event: dict, token: str, request_id: str) -> int:
            headers = {"Authorization": f"Bearer {token}", "X-Request-Id": request_id}
            async with session.post(
                url_of["lineage"], data=orjson.dumps(event), headers=headers
            ) as response:
                return response.status

        statuses = await asyncio.gather(
            *(post(invalid, TOKEN, f"req-{i}") for i in range(20)),
            *(post(forbidden, TOKEN, "req-f") for _ in range(5)),
            *(post(invalid, TOKEN + "-wrong", "req-u") for _ in range(5)),
        )
    assert sorted(set(statuses)) == [400, 401, 403]
    lines = _refusals(caplog)
    by_reason = {
        reason: [line for line in lines if line.startswith(f"refused {status} {reason} ")]
        for status, reason in ((400, "invalid"), (403, "forbidden"), (401, "unauthorized"))
    }
    # Once per reason per 10 s (twice on a very slow machine), not once per request.
    assert all(1 <= len(found) <= 2 for found in by_reason.values()), lines
    first_invalid = by_reason["invalid"][0]
    assert first_invalid.startswith("refused 400 invalid from ")
    assert "request id 'req-" in first_invalid and "at /run/runId" in first_invalid
    assert "request id 'req-f'" in by_reason["forbidden"][0]
    assert (
        "(producer https://github.com/lineage-proxy/tests, job team-b/" in by_reason["forbidden"][0]
    )
    assert MARKER not in caplog.text and TOKEN not in caplog.text


def test_lines_held_back_are_counted_in_the_next_line(caplog):
    caplog.set_level(logging.INFO)
    faults = ClientFaults(ProxyMetrics(), interval=3600.0)
    request = make_mocked_request("POST", "/api/v1/lineage")
    details = [{"pointer": "/eventTime", "message": "x"}, {"pointer": "/run", "message": "y"}]
    for _ in range(5):
        faults.refused(request, 400, "invalid", "bad event", details)
    faults.interval = 0.0
    faults.refused(request, 400, "invalid", "bad event", details)
    assert _refusals(caplog) == [
        "refused 400 invalid from ?: bad event at /eventTime (+1)",
        "refused 400 invalid from ?: bad event at /eventTime (+1) (4 more like it not logged)",
    ]
