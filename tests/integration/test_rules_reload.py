"""Hot reload of the rules file while traffic flows: a good file takes over, a broken
one is refused with a clear log line and the old rules keep serving; no request fails.
Also SIGHUP on a real ``lineage-proxy serve`` process."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import uuid
from collections import Counter
from pathlib import Path

import orjson
import pytest
import requests
from aiohttp import ClientSession

from tests.support.figures import report
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.metrics import fetch_metrics, sample
from tests.support.processes import serve_process, wait_until_ready
from tests.support.sample_events import run_event
from tests.support.waiting import wait_for, wait_until

pytestmark = pytest.mark.integration


def rules_to(topic: str) -> str:
    return f"""
version: 1
destinations:
  out: {{kind: kafka, topic: {topic}}}
default:
  to: [out]
"""


def replace_file(path: Path, text: str) -> None:
    """Write the way editors and config tools do: a new file renamed over the old."""
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def reloads(metrics: str, result: str) -> int:
    return int(sample(metrics, "lineage_proxy_rules_reloads_total", result=result) or 0)


async def test_reload_good_then_broken_file_while_traffic_flows(
    start_proxy, broker, tmp_path: Path, caplog
):
    first, second = (f"reload.{uuid.uuid4().hex[:8]}" for _ in range(2))
    rules = tmp_path / "rules.yaml"
    replace_file(rules, rules_to(first))
    sent: list[tuple[str, int]] = []  # (runId, reloads seen so far)
    statuses: list[int] = []
    phase = 0
    stop = asyncio.Event()

    async with (
        start_proxy(routing={"rules": rules, "reload_interval_seconds": 0.05}) as url,
        ClientSession() as session,
    ):

        async def client() -> None:
            while not stop.is_set():
                event = run_event()
                started_in = phase
                async with session.post(f"{url}/api/v1/lineage", data=orjson.dumps(event)) as resp:
                    statuses.append(resp.status)
                sent.append((event["run"]["runId"], started_in))

        async def metrics() -> str:
            return await (await session.get(f"{url}/metrics")).text()

        async def until(result: str, count: int) -> None:
            async def reloaded() -> bool:
                return reloads(await metrics(), result) >= count

            await wait_for(reloaded, what=f"a reload with result {result}")

        async def more_traffic(events: int) -> None:
            target = len(sent) + events
            await wait_for(lambda: len(sent) >= target, what=f"{events} more events sent")

        clients = [asyncio.create_task(client()) for _ in range(4)]
        await more_traffic(20)
        await asyncio.to_thread(replace_file, rules, rules_to(second))
        await until("success", 1)
        phase = 1
        await more_traffic(20)
        with caplog.at_level(logging.ERROR, logger="proxy.ingest.live_rules"):
            await asyncio.to_thread(replace_file, rules, "version: 1\ndefault: {to: [out]\n")
            await until("failure", 1)
            phase = 2
            await more_traffic(20)
        stop.set()
        await asyncio.gather(*clients)
        assert reloads(await metrics(), "success") == 1

    assert set(statuses) == {200}
    (refused,) = [r.getMessage() for r in caplog.records if "reload refused" in r.getMessage()]
    assert "previous rules keep serving" in refused and f"{rules}:3: invalid YAML" in refused

    in_first = read_all_produced_so_far(broker.bootstrap_servers, first)
    in_second = read_all_produced_so_far(broker.bootstrap_servers, second)
    landed = [orjson.loads(r.value)["run"]["runId"] for r in in_first + in_second]
    # Every event landed, and nothing else. Once each, unless Kafka was slow to confirm on
    # a loaded machine: an event not confirmed in time is spooled too, and a late
    # confirmation of the first write then leaves a second copy (at least once; seen in CI).
    counts = Counter(landed)
    report(
        "rules_reload_under_traffic",
        sent=len(sent),
        found=len(counts),
        lost=len({run_id for run_id, _ in sent} - set(counts)),
        duplicates=sum(counts.values()) - len(counts),
    )
    assert set(counts) == {run_id for run_id, _ in sent}
    second_ids = {orjson.loads(r.value)["run"]["runId"] for r in in_second}
    # Sent after the good reload: the new rules; after the broken one: still the new rules.
    assert all(run_id in second_ids for run_id, phase_ in sent if phase_ >= 1)
    assert any(phase_ == 2 for _, phase_ in sent)


def test_sighup_reloads_the_rules_of_a_running_server(broker, tmp_path: Path):
    first, second = (f"sighup.{uuid.uuid4().hex[:8]}" for _ in range(2))
    rules = tmp_path / "rules.yaml"
    replace_file(rules, rules_to(first))
    process, url = serve_process(
        broker.bootstrap_servers,
        routing__rules=str(rules),
        routing__reload_interval_seconds="0",  # only SIGHUP reloads
    )
    try:
        wait_until_ready(url, process)
        before, after = run_event(), run_event()
        assert requests.post(f"{url}/api/v1/lineage", json=before, timeout=10).ok
        replace_file(rules, rules_to(second))
        process.send_signal(signal.SIGHUP)
        wait_until(
            lambda: reloads(fetch_metrics(url), "success") == 1,
            what="the reload SIGHUP asked for",
            alive=process,
        )
        assert requests.post(f"{url}/api/v1/lineage", json=after, timeout=10).ok
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    (one,) = read_all_produced_so_far(broker.bootstrap_servers, first)
    (two,) = read_all_produced_so_far(broker.bootstrap_servers, second)
    assert orjson.loads(one.value) == before and orjson.loads(two.value) == after


def test_a_broken_rules_file_stops_serve_at_start_with_file_line_and_reason(broker, tmp_path: Path):
    rules = tmp_path / "rules.yaml"
    replace_file(rules, "version: 1\ndestinations: {}\nrules:\n  - {drop: true, to: [x]}\n")
    process, _ = serve_process(broker.bootstrap_servers, routing__rules=str(rules))
    assert process.wait(timeout=60) == 2
    stderr = process.log()
    assert f"{rules}:4: rules.0: Value error, drop: true cannot be combined" in stderr
    assert f"{rules}:1: default: Field required" in stderr
