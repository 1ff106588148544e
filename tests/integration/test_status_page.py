"""The status page and its JSON against a real proxy with traffic, and the page in a real
headless Chromium (docs/operate/status-page.md)."""

from __future__ import annotations

import html
import re
import shutil
import uuid

import orjson
import pytest
from aiohttp import ClientSession

from proxy import __version__
from tests.integration.test_lineage_endpoint import post
from tests.support.paths import REPO
from tests.support.sample_events import run_event

pytestmark = pytest.mark.integration

ARTIFACTS = REPO / "test-artifacts"
# What the page shows where it has no figure yet (an en dash).
NO_FIGURE = "\u2013"
AUTH = {"enabled": True, "tokens": [{"name": "ops", "token": "secret-ops"}]}


def traffic(marker: str) -> tuple[list[dict], list[dict]]:
    """Three valid events (one repaired: a naive eventTime) and two invalid ones whose
    payloads carry ``marker``, which must never show on the page."""
    valid = [run_event(namespace="team-a") for _ in range(3)]
    valid[2]["eventTime"] = "2026-11-23T10:00:00"
    invalid = [run_event(namespace="team-a", name="nightly") for _ in range(2)]
    for event in invalid:  # the job's name is shown (who sent it), a facet's value never
        event["run"]["facets"]["note"] = {
            "_producer": "https://example.com/notes",
            "_schemaURL": "https://example.com/NoteRunFacet.json",
            "text": marker,
        }
    invalid[0]["run"]["runId"] = f"{marker}-not-a-uuid"
    invalid[1]["eventType"] = "FINISHED"
    return valid, invalid


async def get(url: str, **headers: str) -> tuple[int, bytes, dict[str, str]]:
    async with ClientSession() as session, session.get(url, headers=headers) as response:
        return response.status, await response.read(), dict(response.headers)


async def send(url: str, events: list[dict], **headers: str) -> list[int]:
    return [(await post(f"{url}/api/v1/lineage", event, **headers))[0] for event in events]


async def test_status_json_counts_traffic_and_lists_rejections_without_payload(start_proxy):
    marker = f"payload-{uuid.uuid4().hex}"
    valid, invalid = traffic(marker)
    async with start_proxy() as url:
        assert await send(url, valid) == [200, 200, 200]
        assert await send(url, invalid, **{"X-Request-Id": "r-1"}) == [400, 400]
        status, body, headers = await get(f"{url}/api/v1/status")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert marker.encode() not in body
    report = orjson.loads(body)
    events = report["events"]
    assert (events["accepted"]["total"], events["accepted"]["per_minute"]) == (3, 3)
    assert events["rejected"]["total"] == 2 and events["rejected"]["by_reason"] == {"invalid": 2}
    assert events["repaired"]["total"] == 1
    assert report["ready"] is True
    assert report["version"] == __version__  # what is running, as /metrics' build info says
    kafka = next(d for d in report["destinations"] if d["name"] == "kafka")
    assert kafka["delivered"] == 3 and kafka["ready"] and kafka["latency_ms"]["mean"] > 0
    assert (kafka["state"], kafka["spooled"], kafka["problem"]) == ("ready", 0, None)
    # One spool per cluster, shown once with the destinations that share it.
    [spool] = report["spools"]
    assert kafka["spool"] == spool["directory"] and spool["spooling"] is False
    assert sorted(spool["destinations"]) == ["kafka", "rejected"]
    assert report["status"] == "ready" and report["problems"] == []
    rules = {r["name"]: (r["matched"], r["matched_per_minute"]) for r in report["rules"]}
    assert rules["(default)"] == (3, 3)
    newest, oldest = report["recent_rejections"]
    assert (oldest["status"], oldest["reason"]) == (400, "invalid")
    assert (oldest["pointers"], oldest["request_id"]) == (["/run/runId"], "r-1")
    assert newest["pointers"] == ["/eventType"]
    # Traceable: what is wrong, who sent it, from where — never the payload.
    assert oldest["messages"] == ["/run/runId: not a valid UUID"], oldest
    assert (oldest["client"], oldest["job"]) == ("127.0.0.1", "team-a/nightly")
    assert oldest["producer"] == valid[0]["producer"]


async def test_status_page_needs_a_token_when_auth_is_on_and_it_and_the_tap_can_be_switched_off(
    start_proxy, browser, tmp_path
):
    async with start_proxy(auth=AUTH) as url:
        page_status, page, headers = await get(f"{url}/ui")
        assert page_status == 200 and b"lineage-proxy" in page
        assert "default-src 'none'" in headers["Content-Security-Policy"]
        assert (await get(f"{url}/api/v1/status"))[0] == 401
        assert (await get(f"{url}/api/v1/status", Authorization="Bearer wrong"))[0] == 401
        assert (await get(f"{url}/api/v1/status", Authorization="Bearer secret-ops"))[0] == 200
        assert await send(url, [run_event()], Authorization="Bearer secret-ops") == [200]
        # The page asks for the token, or takes it from the address (#token=, never sent).
        asks = (await browser(f"{url}/ui", tmp_path / "a", "--dump-dom")).decode()
        with_token = f"{url}/ui#token=secret-ops"
        shows = (await browser(with_token, tmp_path / "b", "--dump-dom")).decode()
    assert 'id="login" style="display: block;"' in asks
    assert text_of(asks, "accepted-total") == NO_FIGURE
    assert 'id="login" style="display: none;"' in shows
    assert text_of(shows, "accepted-total") == "1"
    async with start_proxy(server={"status_page": False, "tap": False}) as url:
        paths = ("/", "/ui", "/api/v1/status", "/api/v1/tap")
        assert [(await get(f"{url}{path}"))[0] for path in paths] == [404] * 4


def text_of(dom: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</', dom, re.S)
    assert found, f"no #{element_id} in the page"
    return html.unescape(found.group(1)).strip()


async def test_status_page_in_headless_chromium_shows_live_figures_and_no_payload(
    start_proxy, browser, tmp_path
):
    marker = f"payload-{uuid.uuid4().hex}"
    valid, invalid = traffic(marker)
    screenshot = tmp_path / "status_page.png"
    async with start_proxy() as url:
        assert await send(url, valid) == [200, 200, 200]
        assert await send(url, invalid) == [400, 400]
        dom = (await browser(f"{url}/", tmp_path / "profile", "--dump-dom")).decode()
        await browser(
            f"{url}/",
            tmp_path / "profile",
            f"--screenshot={screenshot}",
            "--window-size=1280,1000",
            "--hide-scrollbars",
        )
    assert text_of(dom, "accepted-total") == "3"
    assert text_of(dom, "rejected-total") == "2"
    assert text_of(dom, "repaired-total") == "1"
    assert text_of(dom, "ready") == "ready"
    assert text_of(dom, "version") == __version__
    assert '<code class="pointer">/run/runId</code>' in dom
    assert '<code class="pointer">/eventType</code>' in dom
    assert ">kafka<" in dom and ">(default)<" in dom
    assert marker not in dom
    assert screenshot.stat().st_size > 10_000
    ARTIFACTS.mkdir(exist_ok=True)
    kept = ARTIFACTS / "status_page.png"
    shutil.copyfile(screenshot, kept)
    print(f"status page screenshot: {screenshot} (copied to {kept})")
