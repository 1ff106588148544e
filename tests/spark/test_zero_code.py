"""Lineage from an unchanged PySpark job, and none of it lost while the proxy is down.

``tests/spark/unmodified_job.py`` imports nothing of ours; ``python -m
spark_emitter.instrument`` runs it with lineage on, configured by environment only
(``OPENLINEAGE_URL``, ``OPENLINEAGE_NAMESPACE``, ``OPENLINEAGE_SPARK_BUFFER_DIR``). The
proxy is down for the whole job — nothing listens on the URL's port — so every event waits
in the disk buffer; then the real proxy starts on that port and ``python -m
spark_emitter.buffer send`` delivers them: every event reaches Kafka, in the order the job
produced them.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.embedded_broker import free_port
from tests.spark.conftest import event_types
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.paths import REPO

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

WRITE = "execute_insert_into_hadoop_fs_relation_command"


async def _run(*argv: str, env: dict[str, str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *argv,
        env=env,
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=600)
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


def _buffered(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(directory.glob("*.jsonl")) for line in f.open()]


async def test_an_unchanged_job_run_while_the_proxy_is_down_delivers_every_event_later(
    start_proxy, broker, topic, tmp_path: Path
) -> None:
    port = free_port()
    buffer = tmp_path / "buffer"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")},
        "OPENLINEAGE_URL": f"http://127.0.0.1:{port}",
        "OPENLINEAGE_NAMESPACE": "zero-code",
        "OPENLINEAGE_SPARK_BUFFER_DIR": str(buffer),
    }
    job = str(REPO / "tests" / "spark" / "unmodified_job.py")
    code, _, stderr = await _run(
        sys.executable,
        "-m",
        "spark_emitter.instrument",
        sys.executable,
        job,
        str(tmp_path / "out"),
        env=env,
    )
    assert code == 0, stderr[-3000:]
    assert (tmp_path / "out" / "doubled").is_dir()
    assert "kept in" in stderr, stderr[-3000:]
    kept = _buffered(buffer)
    names = [e["job"]["name"] for e in kept]
    assert names[0] == names[-1] == "unmodified_job"
    assert {f"unmodified_job.{WRITE}.out_numbers", f"unmodified_job.{WRITE}.out_doubled"} <= set(
        names
    )

    async with start_proxy(server={"port": port}):
        code, stdout, stderr = await _run(
            sys.executable, "-m", "spark_emitter.buffer", "send", str(buffer), env=env
        )
    assert code == 0, stderr[-3000:]
    assert f"{len(kept)} event(s) sent" in stdout
    records = await asyncio.to_thread(read_all_produced_so_far, broker.bootstrap_servers, topic)
    arrived = [orjson.loads(r.value) for r in records]
    # Every event, once; each run's in the order the job produced them (a run is one key,
    # one partition; runs may sit in different partitions).
    assert sorted((e["run"]["runId"], e["eventTime"], e["eventType"]) for e in arrived) == sorted(
        (e["run"]["runId"], e["eventTime"], e["eventType"]) for e in kept
    )
    for run_id in {e["run"]["runId"] for e in kept}:
        assert [e["eventType"] for e in arrived if e["run"]["runId"] == run_id] == [
            e["eventType"] for e in kept if e["run"]["runId"] == run_id
        ]
    for name in (f"unmodified_job.{WRITE}.out_numbers", f"unmodified_job.{WRITE}.out_doubled"):
        run = [e for e in arrived if e["job"]["name"] == name]
        assert event_types(run)[0] == "START" and event_types(run)[-1] == "COMPLETE"
    assert [e["eventType"] for e in arrived if e["job"]["name"] == "unmodified_job"] == [
        "START",
        "COMPLETE",
    ]
    assert list(buffer.glob("*.jsonl")) == []
