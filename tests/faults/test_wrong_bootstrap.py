"""A mistyped Kafka address: the proxy is not ready, what it acknowledges is spooled, and
once the address is corrected every acknowledged event reaches Kafka — the spool belongs
to the proxy instance, not to an address string. Spools of older versions (named after
an address) are forwarded too; one written for a cluster the config does not name is
named at start and forwarded by ``lineage-proxy spool drain``.

Real proxies, a real broker, real spool files."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession

from proxy.destinations.kafka.destination import event_headers
from proxy.destinations.kafka.spool import Spool
from proxy.destinations.kafka.spool_dirs import record_cluster
from proxy.openlineage import event_key
from proxy.server.embedded_broker import free_port
from tests.support.figures import report
from tests.support.load import compare, kafka_run_ids, post_events
from tests.support.paths import REPO
from tests.support.sample_events import run_event
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


async def _readyz(url: str) -> tuple[int, dict[str, Any]]:
    async with ClientSession() as session, session.get(f"{url}/readyz") as resp:
        return resp.status, await resp.json()


async def _spool_empty(url: str) -> bool:
    """Every spool the proxy drains (its own and those it adopted) holds nothing."""
    async with ClientSession() as session, session.get(f"{url}/metrics") as resp:
        text = await resp.text()
    depths = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("lineage_proxy_spool_events{")
    ]
    return bool(depths) and sum(depths) == 0


async def test_events_taken_with_a_mistyped_bootstrap_reach_kafka_once_it_is_corrected(
    start_proxy, broker, topic, tmp_path: Path
):
    typo = f"127.0.0.1:{free_port()}"
    spool = {"spool": {"directory": tmp_path}}
    async with start_proxy(bootstrap=typo, kafka=spool) as url:
        load = await post_events(url, (run_event(name=f"job-{i % 7}") for i in range(120)))
        status, body = await _readyz(url)
    assert load.statuses == {200: 120}  # acknowledged: fsynced to the spool
    # Never answered since start: not ready, and the reason names the address.
    assert status == 503 and body["status"] == "not_ready", body
    assert any(typo in problem and "has not answered" in problem for problem in body["problems"])

    async with start_proxy(kafka=spool) as url:  # the corrected address
        landed = await eventually(lambda: _spool_empty(url), 90, 0.2)
        status, body = await _readyz(url)
    found = await asyncio.to_thread(kafka_run_ids, broker.bootstrap_servers, topic)
    figures = report(
        "wrong_bootstrap_then_corrected", sent=load.sent, **compare(load.acknowledged, found)
    )
    assert landed and figures["lost"] == 0
    assert status == 200 and body["status"] == "ready", body
    left = await asyncio.to_thread(lambda: list(tmp_path.rglob("segment-*.spool")))
    assert not left, "a spooled event was left on disk"


async def _write_spool(directory: Path, topic: str, events: list[dict[str, Any]]) -> None:
    """A spool as an earlier run wrote it (no cluster.json: an older version's)."""
    spool = Spool(directory, 1 << 30, 1 << 20)
    await spool.open()
    for event in events:
        await spool.append(topic, event_key(event), event_headers(event), orjson.dumps(event))
    await spool.close()


async def test_a_spool_an_older_version_named_after_a_mistyped_address_is_forwarded(
    start_proxy, broker, topic, tmp_path: Path, caplog
):
    caplog.set_level(logging.WARNING)
    events = [run_event(name=f"job-{i % 3}") for i in range(40)]
    await _write_spool(tmp_path / "127.0.0.1_9", topic, events)
    run_ids = [e["run"]["runId"] for e in events]
    async with start_proxy(kafka={"spool": {"directory": tmp_path}}) as url:
        landed = await eventually(lambda: _spool_empty(url), 90, 0.2)
    found = await asyncio.to_thread(kafka_run_ids, broker.bootstrap_servers, topic)
    figures = report("old_address_named_spool_migrated", **compare(run_ids, found))
    assert landed and figures["lost"] == 0
    assert any(
        "forwarding 40 events left in spool" in r.getMessage() and "127.0.0.1_9" in r.getMessage()
        for r in caplog.records
    )


async def test_a_spool_for_another_cluster_is_named_at_start_and_sent_by_spool_drain(
    start_proxy, broker, topic, tmp_path: Path, caplog
):
    caplog.set_level(logging.WARNING)
    elsewhere = tmp_path / "kafka-b_9092"
    events = [run_event(name="other-cluster") for _ in range(25)]
    await _write_spool(elsewhere, topic, events)
    record_cluster(elsewhere, "kafka-b:9092")
    run_ids = [e["run"]["runId"] for e in events]
    async with start_proxy(kafka={"spool": {"directory": tmp_path}}):
        pass
    stranded = [r.getMessage() for r in caplog.records if "NOT forwarded" in r.getMessage()]
    assert len(stranded) == 1, [r.getMessage() for r in caplog.records]
    assert "25 acknowledged events for Kafka at kafka-b:9092" in stranded[0]
    assert f"lineage-proxy spool drain {elsewhere} --bootstrap-servers" in stranded[0]
    assert sorted(p.name for p in elsewhere.glob("segment-*.spool"))  # left as it was

    env_args = {
        "LINEAGE_PROXY__KAFKA__SPOOL__DIRECTORY": str(tmp_path),
        "LINEAGE_PROXY__KAFKA__BOOTSTRAP_SERVERS": broker.bootstrap_servers,
    }
    listed = await asyncio.to_thread(_cli, env_args, "spool", "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    [entry] = [orjson.loads(line) for line in listed.stdout.splitlines()]
    assert (entry["directory"], entry["events"], entry["cluster"]) == (
        str(elsewhere),
        25,
        "kafka-b:9092",
    )
    assert "spool drain" in entry["state"]

    drained = await asyncio.to_thread(
        _cli,
        env_args,
        "spool",
        "drain",
        str(elsewhere),
        "--bootstrap-servers",
        broker.bootstrap_servers,
    )
    assert drained.returncode == 0, drained.stderr
    assert "25 of 25 events sent" in drained.stdout
    found = await asyncio.to_thread(kafka_run_ids, broker.bootstrap_servers, topic)
    figures = report("other_cluster_spool_drained_by_cli", **compare(run_ids, found))
    assert figures["lost"] == 0
    assert not any(elsewhere.glob("segment-*.spool"))


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proxy", *args, "--config", "config.yaml"],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_spool_help_names_both_commands_and_shows_an_example():
    done = subprocess.run(
        [sys.executable, "-m", "proxy", "spool", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "list" in done.stdout and "drain" in done.stdout
    assert "lineage-proxy spool drain var/spool/" in done.stdout
