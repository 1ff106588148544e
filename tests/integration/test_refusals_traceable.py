"""Refusals and repairs an operator can trace to a sender: the stored envelope carries
the request id the client was answered with and is filed under the job's namespace; a
repair kind is logged once (with producer and job), not never and not per event."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import orjson
import pytest

from tests.integration.test_lineage_endpoint import post
from tests.support.sample_events import run_event

pytestmark = pytest.mark.integration

PRODUCER = "https://example.com/pipelines/v2"


def _envelopes(root: Path) -> dict[str, list[dict]]:
    """Archived rejection envelopes by their namespace partition directory."""
    found: dict[str, list[dict]] = {}
    for path in sorted((root / "rejected").glob("dt=*/namespace=*/*")):
        found.setdefault(path.parent.name, []).extend(
            orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()
        )
    return found


def _request_id(headers: dict[str, str]) -> str:
    return {name.lower(): value for name, value in headers.items()}["x-request-id"]


async def test_stored_refusals_carry_the_request_id_and_sit_under_the_jobs_namespace(
    start_proxy, tmp_path: Path
):
    single = run_event(namespace="team-x", name="nightly")
    single["producer"] = PRODUCER
    single["run"]["runId"] = "not-a-uuid"
    in_batch = run_event(namespace="team-y", name="hourly")
    in_batch["eventType"] = "FINISHED"
    async with start_proxy(routing={"archive_root": tmp_path}) as url:
        status, _, headers = await post(f"{url}/api/v1/lineage", single, **{"X-Request-Id": "t-1"})
        assert status == 400 and _request_id(headers) == "t-1"
        status, _, batch_headers = await post(
            f"{url}/api/v1/lineage/batch", [run_event(), in_batch]
        )
        assert status == 200
    envelopes = _envelopes(tmp_path)
    assert set(envelopes) == {"namespace=team-x", "namespace=team-y"}, envelopes.keys()
    [first] = envelopes["namespace=team-x"]
    [second] = envelopes["namespace=team-y"]
    assert first["rejection"]["request_id"] == "t-1" and first["event"] == single
    assert second["rejection"]["request_id"] == _request_id(batch_headers)


async def test_a_repair_kind_is_logged_once_with_producer_and_job(start_proxy, caplog):
    caplog.set_level(logging.INFO, logger="proxy.ingest.repair_log")
    marker = f"marker-{uuid.uuid4().hex}"
    events = []
    for _ in range(3):
        event = run_event(namespace="team-r", name="daily")
        event["producer"] = PRODUCER
        event["eventTime"] = "2026-11-23T10:00:00"  # no offset: repaired (UTC)
        event["run"]["facets"]["note"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://example.com/NoteRunFacet.json",
            "text": marker,
        }
        events.append(event)
    async with start_proxy() as url:
        for event in events:
            status, body, _ = await post(f"{url}/api/v1/lineage", event)
            assert status == 200 and body["repaired"], body
    lines = [r.getMessage() for r in caplog.records if r.name == "proxy.ingest.repair_log"]
    assert len(lines) == 1, lines
    [line] = lines
    assert line.startswith(f"repaired {body['repaired'][0]['repair']} at /eventTime")
    assert f"producer {PRODUCER}, job team-r/daily" in line
    assert "'2026-11-23T10:00:00' → '2026-11-23T10:00:00" in line
    assert marker not in line
