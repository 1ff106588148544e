"""Lineage from an unchanged PySpark job run by ``spark-submit``, turned on from outside.

``tests/spark/unmodified_job.py`` imports nothing of ours. Under ``spark-submit`` (client
deploy mode, the pip package's script) its driver Python imports PySpark from
``$SPARK_HOME/python/lib/pyspark.zip``, the case that crashed every job before issue 38.
Two ways to turn lineage on, one job each:

- ``python -m spark_emitter.instrument spark-submit job.py``, configured by environment
  only, with the proxy down for the whole job — nothing listens on the URL's port — so
  every event waits in the disk buffer; then the real proxy starts on that port and
  ``python -m spark_emitter.buffer send`` delivers them: every event reaches Kafka, in the
  order the job produced them.
- as a cluster admin sets it once: ``spark-env.sh`` (the driver's ``PYTHONPATH`` and
  Python) and ``spark-defaults.conf`` (where events go), and a plain ``spark-submit
  job.py`` with no ``OPENLINEAGE_*`` in its environment; the proxy up, every event in Kafka.

The JVM-free reproduction of the ``pyspark.zip`` crash is in
``tests/unit/spark_emitter/test_zero_code.py``. Cluster deploy mode cannot run here (Spark
refuses it for ``local`` masters and for Python on standalone clusters): not tested.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import orjson
import pyspark
import pytest

from proxy.server.embedded_broker import free_port
from tests.spark.conftest import event_types
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.paths import REPO

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

WRITE = "execute_insert_into_hadoop_fs_relation_command"
JOB = str(REPO / "tests" / "spark" / "unmodified_job.py")
# The pip package's script, as ``pip install pyspark`` puts it on PATH.
SPARK_SUBMIT = str(Path(sys.executable).parent / "spark-submit")
SPARK_HOME = Path(pyspark.__file__).parent
PYSPARK_ZIP = SPARK_HOME / "python" / "lib" / "pyspark.zip"


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


def _clean_environment(**extra: str) -> dict[str, str]:
    """The test's environment without any lineage or Spark launcher settings of its own
    (``SPARK_ENV_LOADED`` would skip ``spark-env.sh``)."""
    dropped = ("OPENLINEAGE", "SPARK_ENV_LOADED", "SPARK_CONF_DIR", "PYSPARK_")
    return {**{k: v for k, v in os.environ.items() if not k.startswith(dropped)}, **extra}


def _buffered(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(directory.glob("*.jsonl")) for line in f.open()]


def _assert_job_lineage(events: list[dict[str, Any]], namespace: str) -> None:
    """The application's START and COMPLETE, and each write's run from START to COMPLETE."""
    assert {e["job"]["namespace"] for e in events} == {namespace}
    for name in (f"unmodified_job.{WRITE}.out_numbers", f"unmodified_job.{WRITE}.out_doubled"):
        run = [e for e in events if e["job"]["name"] == name]
        assert event_types(run)[0] == "START" and event_types(run)[-1] == "COMPLETE", name
    assert [e["eventType"] for e in events if e["job"]["name"] == "unmodified_job"] == [
        "START",
        "COMPLETE",
    ]


async def test_an_unchanged_job_run_while_the_proxy_is_down_delivers_every_event_later(
    start_proxy, broker, topic, tmp_path: Path
) -> None:
    """``python -m spark_emitter.instrument spark-submit job.py``: before issue 38 the
    driver crashed at ``from pyspark.sql import SparkSession`` (``AttributeError:
    partially initialized module 'pyspark.sql.conf'``), the job with it."""
    port = free_port()
    buffer = tmp_path / "buffer"
    env = _clean_environment(
        OPENLINEAGE_URL=f"http://127.0.0.1:{port}",
        OPENLINEAGE_NAMESPACE="zero-code",
        OPENLINEAGE_SPARK_BUFFER_DIR=str(buffer),
        PYSPARK_PYTHON=sys.executable,
    )
    code, stdout, stderr = await _run(
        sys.executable,
        "-m",
        "spark_emitter.instrument",
        SPARK_SUBMIT,
        # Stop tries the buffered events once more (the proxy may be back): with it down,
        # that costs the http transport's ~9 s of retries, cut here to 3 s.
        "--conf",
        "spark.openlineage.emitter.drainTimeoutSeconds=3",
        JOB,
        str(tmp_path / "out"),
        env=env,
    )
    assert code == 0, stderr[-3000:]
    assert f"pyspark imported from {PYSPARK_ZIP}" in stdout, stdout[-3000:]
    assert (tmp_path / "out" / "doubled").is_dir()
    kept = _buffered(buffer)
    # Spark's PythonRunner merges the driver Python's stderr into its stdout (through the
    # JVM's when that is a pipe): the emitter's lines may be in either.
    said = [line for line in (stdout + stderr).splitlines() if line.startswith("openlineage:")]
    assert f"{len(kept)} event(s) not delivered at stop, kept on disk in {buffer}" in str(said), (
        said
    )
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
    _assert_job_lineage(arrived, "zero-code")
    assert list(buffer.glob("*.jsonl")) == []


async def test_lineage_set_once_in_spark_env_and_spark_defaults_reaches_the_proxy(
    start_proxy, broker, topic, tmp_path: Path
) -> None:
    """The admin's route: ``$SPARK_CONF_DIR/spark-env.sh`` puts the autoload folder on the
    driver's ``PYTHONPATH`` (``--pythonpath``, as the docs say), ``spark-defaults.conf``
    names the proxy; the user runs a plain ``spark-submit``. Before issue 38 this crashed
    like the wrapper (the same ``pyspark.zip`` import)."""
    conf = tmp_path / "conf"
    conf.mkdir()
    buffer = tmp_path / "buffer"
    async with start_proxy() as url:
        (conf / "spark-env.sh").write_text(
            f"PYSPARK_PYTHON={sys.executable}\n"
            f'PYTHONPATH="$({sys.executable} -m spark_emitter.instrument --pythonpath)"\n'
        )
        (conf / "spark-defaults.conf").write_text(
            f"spark.openlineage.transport.type http\n"
            f"spark.openlineage.transport.url {url}\n"
            f"spark.openlineage.namespace admin-set\n"
            f"spark.openlineage.emitter.buffer.directory {buffer}\n"
        )
        env = _clean_environment(SPARK_HOME=str(SPARK_HOME), SPARK_CONF_DIR=str(conf))
        code, stdout, stderr = await _run(SPARK_SUBMIT, JOB, str(tmp_path / "out"), env=env)
    assert code == 0, stderr[-3000:]
    assert f"pyspark imported from {PYSPARK_ZIP}" in stdout, stdout[-3000:]
    # (a send the proxy failed on its way up is retried, and says so: not the exit line)
    assert "not delivered at stop" not in stdout + stderr, (stdout + stderr)[-3000:]
    records = await asyncio.to_thread(read_all_produced_so_far, broker.bootstrap_servers, topic)
    _assert_job_lineage([orjson.loads(r.value) for r in records], "admin-set")
    assert list(buffer.glob("*.jsonl")) == []
