"""dbt-ol (openlineage-dbt) on dbt-duckdb, through the proxy: every event reaches Kafka.

The dbt venv and the runs: tests/support/dbt.py. openlineage-dbt 1.54 builds the ABORT of
a killed run with ``datetime.now()`` — no UTC offset — which is why a killed run is part of
this test.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from pathlib import Path

import orjson
import pytest

from tests.support.dbt import dbt_ol
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.load import kafka_run_ids
from tests.support.recording_client import sent_events
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RUN_SECONDS = 180


def _children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


async def test_dbt_build_every_event_reaches_kafka(start_proxy, broker, topic, dbt_bin, tmp_path):
    async with start_proxy() as url:
        process = await dbt_ol(dbt_bin, tmp_path, url, "build", "--exclude", "endless")
        assert await asyncio.wait_for(process.wait(), RUN_SECONDS) == 0, (
            tmp_path / "dbt-ol.log"
        ).read_text()
    sent = sent_events(tmp_path)
    jobs = {e["job"]["name"] for e in sent}
    assert {
        "dbt-run-lineage_proxy_tests",
        "model.lineage_proxy_tests.orders",
        "model.lineage_proxy_tests.revenue_by_customer",
    } <= jobs
    assert kafka_run_ids(broker.bootstrap_servers, topic) == Counter(
        e["run"]["runId"] for e in sent
    )


async def test_dbt_run_killed_mid_model_its_abort_reaches_kafka_repaired(
    start_proxy, broker, topic, dbt_bin, tmp_path
):
    async with start_proxy() as url:
        process = await dbt_ol(dbt_bin, tmp_path, url, "run", "--select", "endless")

        def endless_started() -> bool:
            if any(
                e["job"]["name"] == "model.lineage_proxy_tests.endless"
                for e in sent_events(tmp_path)
            ):
                return True
            assert process.returncode is None, (tmp_path / "dbt-ol.log").read_text()
            return False

        await wait_for(endless_started, RUN_SECONDS, "the endless model to start")
        [dbt] = _children(process.pid)  # dbt itself, run by dbt-ol
        os.kill(dbt, signal.SIGKILL)
        await asyncio.wait_for(process.wait(), RUN_SECONDS)
    sent = sent_events(tmp_path)
    [abort] = [e for e in sent if e["eventType"] == "ABORT"]
    assert abort["job"]["name"] == "dbt-run-lineage_proxy_tests"
    assert not abort["eventTime"].endswith("Z")  # what openlineage-dbt 1.54 sends
    events = read_all_produced_so_far(broker.bootstrap_servers, topic)
    landed_run_ids = Counter(orjson.loads(r.value)["run"]["runId"] for r in events)
    assert landed_run_ids == Counter(e["run"]["runId"] for e in sent)
    [landed] = [r for r in events if orjson.loads(r.value)["eventType"] == "ABORT"]
    assert orjson.loads(landed.value)["eventTime"] == abort["eventTime"] + "Z"
    assert b"naive_date_time" in landed.headers["ol_repairs"]
