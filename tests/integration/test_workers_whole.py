"""``serve --workers 2``: the status page and the tap answer for the whole proxy, whichever
worker takes the request (docs/operate/scaling.md,
docs/operate/status-page.md, docs/operate/tap.md)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import requests

from proxy.tap.client import tap_events
from tests.integration.test_workers import (
    by_worker,
    samples,
    two_workers,
    wait_until_both_listen,
)
from tests.support.figures import report
from tests.support.load import post_events
from tests.support.sample_events import run_event
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


async def tap_until_open(url: str, query: dict[str, str], seen: list[dict[str, Any]]):
    """A tap task, returned once its stream is open (every worker forwards from then on)."""
    opened = asyncio.Event()

    def on_note(note: str) -> None:
        if note.startswith("watching"):
            opened.set()

    def on_event(record: dict[str, Any]) -> bool:
        seen.append(record)
        return True

    task = asyncio.create_task(tap_events(url, query, None, on_event, on_note))
    await asyncio.wait_for(opened.wait(), 30)
    return task


def status(url: str) -> dict[str, Any]:
    # A new connection each time: a fresh draw of the kernel's SO_REUSEPORT hash.
    answer = requests.get(f"{url}/api/v1/status", timeout=10, headers={"Connection": "close"})
    answer.raise_for_status()
    return answer.json()


def status_from_worker(url: str, worker: int) -> dict[str, Any]:
    """Ask until ``worker`` answers; a request that reached a stopped worker times out."""
    for _ in range(20):
        with contextlib.suppress(requests.Timeout):
            answer = requests.get(
                f"{url}/api/v1/status", timeout=6, headers={"Connection": "close"}
            ).json()
            if answer["answered_by"] == worker:
                return answer
    raise AssertionError(f"worker {worker} never answered")


def refuse(url: str, index: int) -> int:
    bad = run_event(name=f"refused-{index}")
    bad["run"]["runId"] = "not-a-uuid"
    answer = requests.post(
        f"{url}/api/v1/lineage", json=bad, timeout=10, headers={"Connection": "close"}
    )
    return answer.status_code


@pytest.mark.slow
async def test_status_and_tap_on_any_worker_show_every_workers_events_and_refusals(
    broker, topic, tmp_path: Path
):
    process, url = two_workers(broker.bootstrap_servers, topic, tmp_path)
    seen: list[dict[str, Any]] = []
    try:
        await asyncio.to_thread(wait_until_both_listen, url, process)
        tap = await tap_until_open(url, {"namespace": "watched*"}, seen)
        watched = [run_event(namespace="watched", name=f"job-{i}") for i in range(150)]
        others = [run_event(namespace="other", name=f"job-{i}") for i in range(50)]
        load = await post_events(url, [*watched, *others], concurrency=32)
        refusals = [await asyncio.to_thread(refuse, url, i) for i in range(20)]
        accepted_by_worker = by_worker(samples(url, "lineage_proxy_events_accepted_total"))
        rejected_by_worker = by_worker(samples(url, "lineage_proxy_events_rejected_total"))
        answers = [await asyncio.to_thread(status, url) for _ in range(12)]
        wanted = {e["run"]["runId"] for e in watched}
        # The forwarded events arrive in batches: a moment at most.
        await eventually(lambda: {r["event"]["run"]["runId"] for r in seen} >= wanted)
        tap.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await tap
        # A worker that cannot answer (stopped) is shown down; the page still works.
        stopped = answers[0]["workers"][1]["pid"]
        os.kill(stopped, signal.SIGSTOP)
        try:
            alone = await asyncio.to_thread(status_from_worker, url, 0)
        finally:
            os.kill(stopped, signal.SIGCONT)
    finally:
        process.terminate()
        await asyncio.to_thread(process.wait, 60)
    tapped = [r["event"]["run"]["runId"] for r in seen]
    report(
        "two_workers_status_and_tap_whole",
        sent=load.sent,
        acknowledged=len(load.acknowledged),
        accepted_by_worker=accepted_by_worker,
        rejected_by_worker=rejected_by_worker,
        status_answered_by=sorted({a["answered_by"] for a in answers}),
        tapped=len(tapped),
        tapped_watched=len(set(tapped) & wanted),
    )
    assert load.statuses == {200: 200}
    assert refusals == [400] * 20
    # Both workers took events and refusals: a figure of one worker would fall short.
    assert set(accepted_by_worker) == {"0", "1"} and min(accepted_by_worker.values()) > 0
    assert set(rejected_by_worker) == {"0", "1"} and min(rejected_by_worker.values()) > 0
    assert {a["answered_by"] for a in answers} == {0, 1}
    for answer in answers:
        assert answer["events"]["accepted"]["total"] == 200
        assert answer["events"]["rejected"]["total"] == 20
        assert [(w["worker"], w["up"]) for w in answer["workers"]] == [(0, True), (1, True)]
        assert {str(w["worker"]): w["accepted"] for w in answer["workers"]} == accepted_by_worker
        kafka = next(d for d in answer["destinations"] if d["name"] == "kafka")
        assert kafka["delivered"] == 200 and kafka["ready"]
        assert kafka["latency_ms"]["p99"] is not None
        rejections = answer["recent_rejections"]
        assert len(rejections) == 20
        assert [r["time"] for r in rejections] == sorted(
            (r["time"] for r in rejections), reverse=True
        )
    assert [(w["worker"], w["up"]) for w in alone["workers"]] == [(0, True), (1, False)]
    assert alone["events"]["accepted"]["total"] == accepted_by_worker["0"]
    assert alone["events"]["rejected"]["total"] == rejected_by_worker["0"]
    # The tap saw every watched event, whichever worker accepted it, once; no others.
    assert sorted(tapped) == sorted(wanted)
    assert process.returncode == 0, process.log()
