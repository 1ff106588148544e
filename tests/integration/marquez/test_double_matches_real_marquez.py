"""The Marquez double (tests/support/doubles/marquez_double.py) answers as the real Marquez 0.50.0
does, for every kind of input the double claims to reproduce: the same status, and for a
500 the same ``code`` in the body (which tells the event's fault from the server's).

The double stays in the tests that need what a real server cannot be made to do on
demand (answer 503 for a set time, count its answers) or that run where no Marquez can be
had; this test is what keeps it honest.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import orjson
import pytest

from tests.support.doubles.marquez_double import MarquezDouble
from tests.support.marquez_state import post_raw
from tests.support.sample_events import job_event, run_event

pytestmark = [
    pytest.mark.integration,
    pytest.mark.marquez,
    pytest.mark.xdist_group("marquez"),
    pytest.mark.timeout(900),
]


def _event(**change: Any) -> dict[str, Any]:
    document = run_event(namespace=f"double-{uuid.uuid4().hex[:8]}")
    document.update(change)
    return document


def _without(path: tuple[str, ...]) -> bytes:
    document = _event()
    parent = document
    for part in path[:-1]:
        parent = parent[part]
    del parent[path[-1]]
    return orjson.dumps(document)


CASES = {
    "valid": orjson.dumps(_event()),
    "job.name missing": _without(("job", "name")),
    "job.namespace missing": _without(("job", "namespace")),
    "eventTime missing": _without(("eventTime",)),
    "run.runId missing": _without(("run", "runId")),
    "eventTime null": orjson.dumps(_event(eventTime=None)),
    "eventTime date only": orjson.dumps(_event(eventTime="2026-11-23")),
    "eventTime without offset": orjson.dumps(_event(eventTime="2026-11-23T10:00:00")),
    "runId not a UUID": orjson.dumps(_event(run={"runId": "not-a-uuid", "facets": {}})),
    "eventType unknown": orjson.dumps(_event(eventType="FINISHED")),
    "not JSON": b'{"eventType": "START", ',
    # openlineage-python's JobEvent: inputFacets/outputFacets on its datasets (issue 36).
    "JobEvent with run facets on datasets": orjson.dumps(
        {
            **job_event(namespace=f"double-{uuid.uuid4().hex[:8]}"),
            "outputs": [{"namespace": "pg", "name": "t", "facets": {}, "outputFacets": {}}],
        }
    ),
    "JobEvent without them": orjson.dumps(
        {
            **job_event(namespace=f"double-{uuid.uuid4().hex[:8]}"),
            "outputs": [{"namespace": "pg", "name": "t", "facets": {}}],
        }
    ),
    "NUL in a facet string": orjson.dumps(
        _event(job={"namespace": "n", "name": "j", "facets": {"x": {"note": "a\u0000b"}}})
    ),
}


def _answer(status: int, body: bytes) -> tuple[int, object]:
    """The status, and for a 500 the body's ``code`` (400: the event's fault)."""
    if status != 500:
        return status, None
    try:
        return status, orjson.loads(body).get("code")
    except orjson.JSONDecodeError:
        return status, "no JSON body"


@pytest.mark.parametrize("case", list(CASES))
async def test_the_double_answers_as_the_real_marquez(marquez, case):
    body = CASES[case]
    real = _answer(*await asyncio.to_thread(post_raw, marquez["direct"].url, body))
    async with MarquezDouble() as double:
        doubled = _answer(*await asyncio.to_thread(post_raw, double.url, body))
    assert doubled == real, f"{case}: the double answers {doubled}, Marquez {real}"
