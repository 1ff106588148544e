"""The spool's own disk misbehaves while Kafka is down: it fills up, or it stalls.

Kafka is absent (nothing listens on its port), so 16 clients' events — one message key
each, posted in order — are acknowledged only from the spool. Mid-load the spool's disk
fills up (a real 2 MiB tmpfs, a filler file takes the rest) or its fsync stalls; then the
disk comes back, a broker starts on Kafka's port, and every acknowledged event must
reach Kafka once, in the order it was acknowledged per key (issue 25, items 1 and 5).

A stalled disk cannot be made for real here (no device mapper in these containers, and
FUSE is ruled out): fsync of files under the spool directory blocks until released, on
the proxy's worker thread, as a stuck device would block it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from proxy.server.embedded_broker import EmbeddedBroker, free_port
from tests.support.figures import report
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.load import LoadResult, compare, post_events
from tests.support.paths import fresh_spool_directory
from tests.support.sample_events import event_identity, one_run, run_event
from tests.support.small_disk import fill, small_tmpfs
from tests.support.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHAINS = 16
DRAIN_SECONDS = 90.0
# Spool write deadline for these tests; a request is answered within it (+ slack).
WRITE_TIMEOUT = 2.0


class _Chains:
    """``CHAINS`` clients, one run (message key) each, every client posting in order;
    events are told apart by :func:`event_identity` (one runId per chain)."""

    def __init__(self) -> None:
        self.acknowledged: dict[str, list[str]] = defaultdict(list)
        self.loads: list[LoadResult] = []
        self._runs = [one_run(f"job-{i}", ["RUNNING"])[0] for i in range(CHAINS)]
        self._posted = 0

    def _events(self, chain: int, count: int) -> list[dict[str, Any]]:
        first = self._runs[chain]
        start = datetime.fromisoformat(first["eventTime"])
        return [
            {**first, "eventTime": (start + timedelta(milliseconds=n)).isoformat()}
            for n in range(self._posted, self._posted + count)
        ]

    async def post(self, url: str, per_chain: int, pause: float = 0.0) -> list[LoadResult]:
        loads = await asyncio.gather(
            *(
                post_events(
                    url,
                    self._events(i, per_chain),
                    concurrency=1,
                    pause_seconds=pause,
                    identify=event_identity,
                )
                for i in range(CHAINS)
            )
        )
        self._posted += per_chain
        for run, load in zip(self._runs, loads, strict=True):
            self.acknowledged[f"run:{run['run']['runId']}"] += load.acknowledged
        self.loads += loads
        return list(loads)

    def figures(self, records: list[Any]) -> dict[str, Any]:
        """sent / acknowledged / found / lost / duplicates / out_of_order: acknowledged
        events whose place among their key's acknowledged events in Kafka differs."""
        found: Counter[str] = Counter()
        in_kafka: dict[str, list[str]] = defaultdict(list)
        for record in records:
            identity = event_identity(orjson.loads(record.value))
            found[identity] += 1
            if found[identity] == 1:
                in_kafka[record.key or ""].append(identity)
        out_of_order = 0
        for key, acked in self.acknowledged.items():
            wanted = set(acked)
            seen = [r for r in in_kafka[key] if r in wanted]
            out_of_order += sum(1 for a, b in zip(seen, acked, strict=False) if a != b)
        acked_all = [r for acked in self.acknowledged.values() for r in acked]
        statuses: Counter[int | str] = Counter()
        for load in self.loads:
            statuses.update(load.statuses)
        return {
            "sent": sum(load.sent for load in self.loads),
            "statuses": dict(statuses),
            **compare(acked_all, found),
            "landed_though_refused": len(set(found) - set(acked_all)),
            "out_of_order": out_of_order,
            "slowest_answer": round(max(load.slowest_seconds for load in self.loads), 3),
        }


async def _readyz(url: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/readyz") as resp:
        return resp.status, await resp.json()


async def _drained(url: str) -> bool:
    async def spool_empty() -> bool:
        _, body = await _readyz(url)
        return bool(body.get("details", {}).get("kafka", {}).get("events") == 0)

    return await eventually(spool_empty, within=DRAIN_SECONDS, interval=0.25)


async def test_a_full_spool_disk_under_load_loses_and_reorders_nothing_acknowledged(
    start_proxy_on, topic, caplog: pytest.LogCaptureFixture
):
    with small_tmpfs("2m") as disk:
        if disk is None:
            pytest.skip("mounting a tmpfs is not permitted here (needs root)")
        port = free_port()
        spool = {"spool": {"directory": disk / "spool", "write_timeout_seconds": WRITE_TIMEOUT}}
        chains = _Chains()
        async with start_proxy_on(bootstrap=f"127.0.0.1:{port}", kafka=spool) as url:
            await chains.post(url, 20)

            filled = threading.Event()

            def fill_soon() -> Path:
                filler = fill(disk)
                filled.set()
                return filler

            # The disk fills while the clients post.
            during, filler = await asyncio.gather(
                chains.post(url, 40, pause=0.01), asyncio.to_thread(fill_soon)
            )
            refused = sum(load.statuses[503] for load in during)
            full_status, full_body = await _readyz(url)

            # Hundreds of refusals cost the log (maybe on the full disk) a few lines.
            failure_lines = [
                r
                for r in caplog.records
                if r.levelno >= logging.WARNING and "space" in r.getMessage()
            ]
            filler.unlink()
            freed_at = time.monotonic()
            after = await chains.post(url, 20)
            recovered = min(
                (t for load in after if (t := load.first_success_after(freed_at)) is not None),
                default=None,
            )
            with EmbeddedBroker(port) as broker:
                broker_up = time.monotonic()
                drained = await _drained(url)
                drain_seconds = round(time.monotonic() - broker_up, 2)
                records = await asyncio.to_thread(
                    read_all_produced_so_far, broker.bootstrap_servers, topic
                )
                ready_after, _ = await _readyz(url)
    figures = report(
        "spool_disk_full_under_load_kafka_down",
        **chains.figures(records),
        refused_while_full=refused,
        log_lines_about_the_full_disk=len(failure_lines),
        seconds_to_recover=round(recovered - freed_at, 3) if recovered else None,
        seconds_to_drain=drain_seconds,
    )
    assert refused > 0, "the disk never refused a write"
    assert len(failure_lines) <= 20, [r.getMessage() for r in failure_lines[:5]]
    assert full_status == 503, full_body  # held keys get 503: not ready
    assert "refusing" in str(full_body)
    assert drained and ready_after == 200
    assert figures["lost"] == 0 and figures["duplicates"] == 0
    assert figures["landed_though_refused"] == 0  # nothing refused came back
    assert figures["out_of_order"] == 0
    assert recovered is not None


@contextmanager
def _stallable_fsync(directory: Path) -> Iterator[threading.Event]:
    """While the returned event is clear, fsync of files under ``directory`` blocks."""
    flowing = threading.Event()
    flowing.set()
    real = os.fsync
    prefix = str(directory)

    def fsync(fd: int) -> None:
        with_path = os.readlink(f"/proc/self/fd/{fd}") if isinstance(fd, int) else ""
        if with_path.startswith(prefix):
            flowing.wait(60)
        real(fd)

    os.fsync = fsync  # type: ignore[assignment]
    try:
        yield flowing
    finally:
        flowing.set()
        os.fsync = real


async def test_a_stalled_spool_disk_answers_503_within_the_deadline_and_says_not_ready(
    start_proxy_on, topic
):
    port = free_port()
    directory = fresh_spool_directory()
    spool = {"spool": {"directory": directory, "write_timeout_seconds": WRITE_TIMEOUT}}
    chains = _Chains()
    with _stallable_fsync(directory) as flowing:
        async with start_proxy_on(bootstrap=f"127.0.0.1:{port}", kafka=spool) as url:
            await chains.post(url, 20)
            flowing.clear()
            stalled_at = time.monotonic()
            during = await chains.post(url, 5)
            stalled_status, stalled_body = await _readyz(url)
            flowing.set()
            released_at = time.monotonic()
            after = await chains.post(url, 20)
            recovered = min(
                (t for load in after if (t := load.first_success_after(released_at)) is not None),
                default=None,
            )
            with EmbeddedBroker(port) as broker:
                drained = await _drained(url)
                records = await asyncio.to_thread(
                    read_all_produced_so_far, broker.bootstrap_servers, topic
                )
    refused = sum(load.statuses[503] for load in during)
    slowest_while_stalled = max(load.slowest_seconds for load in during)
    figures = report(
        "spool_disk_stalled_under_load_kafka_down",
        **chains.figures(records),
        refused_while_stalled=refused,
        stalled_for_seconds=round(released_at - stalled_at, 2),
        slowest_answer_while_stalled=round(slowest_while_stalled, 3),
        seconds_to_recover=round(recovered - released_at, 3) if recovered else None,
    )
    assert refused == CHAINS * 5, [load.statuses for load in during]  # none waited forever
    assert slowest_while_stalled < WRITE_TIMEOUT + 5  # the deadline, plus a loaded machine
    assert stalled_status == 503 and "stalled" in str(stalled_body), stalled_body
    assert drained
    assert figures["lost"] == 0 and figures["duplicates"] == 0
    assert figures["out_of_order"] == 0
    assert recovered is not None


async def test_a_spooled_event_kafka_refuses_for_good_is_set_aside_and_shown_to_the_operator(
    start_proxy_on, topic
):
    """Spooled while Kafka was away under a higher message.max.bytes, then the proxy
    restarts with the default (about 1 MB): the drain sets the event aside, goes on, and
    /readyz, /api/v1/status and /metrics show the dead letter (issue 25, item 2)."""
    port = free_port()
    directory = fresh_spool_directory()
    big = run_event(name="big")
    big["run"]["facets"]["blob"] = {
        "_producer": big["producer"],
        "_schemaURL": "https://example.com/schemas/Blob.json#/$defs/Blob",
        "data": "x" * 1_200_000,
    }
    after = run_event(name="big")
    roomy = {"spool": {"directory": directory}, "producer": {"message.max.bytes": 3_000_000}}
    async with start_proxy_on(bootstrap=f"127.0.0.1:{port}", kafka=roomy) as url:
        load = await post_events(url, [big, after], concurrency=1)
    assert load.statuses == {200: 2}  # both spooled
    with EmbeddedBroker(port) as broker:
        default = {"spool": {"directory": directory}}
        async with start_proxy_on(bootstrap=broker.bootstrap_servers, kafka=default) as url:
            drained = await _drained(url)
            ready_status, ready_body = await _readyz(url)
            async with aiohttp.ClientSession() as session:
                async with session.get(f"{url}/api/v1/status") as response:
                    status = await response.json()
                async with session.get(f"{url}/metrics") as response:
                    metrics = await response.text()
        records = await asyncio.to_thread(read_all_produced_so_far, broker.bootstrap_servers, topic)
    found = [orjson.loads(r.value)["run"]["runId"] for r in records]
    assert drained
    assert found == [after["run"]["runId"]]  # the drain went on past the refused one
    assert ready_status == 200, ready_body
    assert ready_body["details"]["kafka"]["dead_letters"] == 1
    # The status page lists each spool once, with the destinations that share it.
    [spool] = [s for s in status["spools"] if "kafka" in s["destinations"]]
    assert spool["dead_letters"] == 1
    dead = [
        line
        for line in metrics.splitlines()
        if line.startswith("lineage_proxy_spool_dead_lettered")
    ]
    assert any(line.endswith(" 1.0") for line in dead), dead
    assert str(directory) not in metrics  # no absolute paths in labels
