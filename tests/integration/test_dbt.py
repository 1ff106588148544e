"""dbt-ol (openlineage-dbt) on dbt-duckdb, through the proxy: every event reaches Kafka.

dbt and openlineage-dbt are installed into their own venv (``var/dbt-venv``, gitignored,
reused while the pinned specs stay the same): their dependencies would not fit ours.
dbt-ol sends each event both to the proxy and to a file (the client's composite
transport), so the file is the independent list of everything the client emitted.
openlineage-dbt 1.54 builds the ABORT of a killed run with ``datetime.now()`` — no UTC
offset — which is why a killed run is part of this test.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.load import kafka_run_ids
from tests.support.paths import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VENV = REPO / "var" / "dbt-venv"
# dbt-core ≥ 1.11 needs a parser wheel its build downloads from GitHub, outside any index.
SPECS = ["dbt-core>=1.9,<1.11", "dbt-duckdb>=1.9,<1.12", "openlineage-dbt==1.54.0"]
PROJECT = REPO / "tests" / "dbt_project"
RUN_SECONDS = 180


@pytest.fixture(scope="module")
def dbt_bin() -> Path:
    """The venv's bin directory with dbt and dbt-ol, installed once per SPECS."""
    stamp = VENV / ".installed"
    if not stamp.is_file() or stamp.read_text() != "\n".join(SPECS):
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = subprocess.run(
            [str(VENV / "bin" / "pip"), "install", "-q", *SPECS],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if pip.returncode != 0:
            pytest.fail(f"could not install {SPECS}:\n{pip.stderr[-3000:]}")
        stamp.write_text("\n".join(SPECS))
    return VENV / "bin"


def _environment(bin_dir: Path, work: Path, proxy_url: str) -> dict[str, str]:
    """dbt-ol configured as a user would: an OpenLineage config file and environment."""
    config = {
        "transport": {
            "type": "composite",
            "continue_on_success": True,
            "continue_on_failure": True,
            "transports": {
                "proxy": {"type": "http", "url": proxy_url},
                "file": {"type": "file", "log_file_path": str(work / "sent.jsonl"), "append": True},
            },
        }
    }
    (work / "openlineage.yml").write_text(yaml.safe_dump(config))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    return {
        **environ,
        "PATH": f"{bin_dir}{os.pathsep}{environ['PATH']}",
        "OPENLINEAGE_CONFIG": str(work / "openlineage.yml"),
        "OPENLINEAGE_NAMESPACE": "dbt-tests",
        "DBT_DUCKDB_PATH": str(work / "warehouse.duckdb"),
        "DO_NOT_TRACK": "1",
    }


def _sent(work: Path) -> list[dict[str, Any]]:
    path = work / "sent.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


async def _dbt_ol(
    bin_dir: Path, work: Path, proxy_url: str, *args: str
) -> asyncio.subprocess.Process:
    project = work / "project"
    if not project.exists():
        shutil.copytree(PROJECT, project)
    return await asyncio.create_subprocess_exec(
        str(bin_dir / "dbt-ol"),
        "--consume-structured-logs",
        *args,
        "--project-dir",
        str(project),
        "--profiles-dir",
        str(project),
        env=_environment(bin_dir, work, proxy_url),
        stdout=(work / "dbt-ol.log").open("ab"),
        stderr=subprocess.STDOUT,
    )


def _children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


async def test_dbt_build_every_event_reaches_kafka(start_proxy, broker, topic, dbt_bin, tmp_path):
    async with start_proxy() as url:
        process = await _dbt_ol(dbt_bin, tmp_path, url, "build", "--exclude", "endless")
        assert await asyncio.wait_for(process.wait(), RUN_SECONDS) == 0, (
            tmp_path / "dbt-ol.log"
        ).read_text()
    sent = _sent(tmp_path)
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
        process = await _dbt_ol(dbt_bin, tmp_path, url, "run", "--select", "endless")
        deadline = time.monotonic() + RUN_SECONDS
        while not any(
            e["job"]["name"] == "model.lineage_proxy_tests.endless" for e in _sent(tmp_path)
        ):
            assert process.returncode is None, (tmp_path / "dbt-ol.log").read_text()
            assert time.monotonic() < deadline, "the endless model never started"
            await asyncio.sleep(0.2)
        [dbt] = _children(process.pid)  # dbt itself, run by dbt-ol
        os.kill(dbt, signal.SIGKILL)
        await asyncio.wait_for(process.wait(), RUN_SECONDS)
    sent = _sent(tmp_path)
    [abort] = [e for e in sent if e["eventType"] == "ABORT"]
    assert abort["job"]["name"] == "dbt-run-lineage_proxy_tests"
    assert not abort["eventTime"].endswith("Z")  # what openlineage-dbt 1.54 sends
    events = read_all_produced_so_far(broker.bootstrap_servers, topic)
    landed_run_ids = Counter(orjson.loads(r.value)["run"]["runId"] for r in events)
    assert landed_run_ids == Counter(e["run"]["runId"] for e in sent)
    [landed] = [r for r in events if orjson.loads(r.value)["eventType"] == "ABORT"]
    assert orjson.loads(landed.value)["eventTime"] == abort["eventTime"] + "Z"
    assert b"naive_date_time" in landed.headers["ol_repairs"]
