"""Events while an action runs: START when it starts, RUNNING while its Spark jobs run,
the failure's error on FAIL — and a driver killed mid-action still leaves its START.

The long actions here hold their one task in a Python UDF until the test releases it (a
file appears), so "while it runs" is a fact the test controls, not a race against time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pyspark
import pytest
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from proxy.validation import EventValidator
from spark_emitter import LineageEmitter
from tests.spark.conftest import LineageReceiver, event_types, settle, wait_until
from tests.support.figures import report
from tests.support.paths import REPO

pytestmark = pytest.mark.spark

VALIDATOR = EventValidator(strict=True)


def _held_until(release: Path, column: str) -> Column:
    """``column``, returned only once ``release`` exists (at most two minutes)."""

    def hold(value):  # no hints: with them Spark would guess a pandas UDF
        import os
        import time

        deadline = time.monotonic() + 120
        while not os.path.exists(str(release)) and time.monotonic() < deadline:
            time.sleep(0.1)
        return value

    return F.udf(hold, "long", useArrow=False)(column)


def test_long_write_sends_start_and_running_while_it_runs_and_complete_after(
    spark: SparkSession,
    emitter: LineageEmitter,
    lineage_receiver: LineageReceiver,
    tmp_path: Path,
) -> None:
    release, out = tmp_path / "release", tmp_path / "held"
    frame = spark.range(2, numPartitions=1).select(_held_until(release, "id").alias("id"))
    failures: list[BaseException] = []

    def write() -> None:
        try:
            frame.write.parquet(str(out))
        except BaseException as error:
            failures.append(error)

    action = threading.Thread(target=write)
    action.start()
    try:
        live = wait_until(
            lambda: (
                {"START", "RUNNING"} <= {e["eventType"] for e in lineage_receiver.jobs_writing(out)}
            ),
            within=120,
        )
        running_then = action.is_alive()
        seen_then = [e["eventType"] for e in lineage_receiver.jobs_writing(out)]
    finally:
        release.touch()
        action.join(timeout=180)
    assert not failures and not action.is_alive()
    assert live, f"no START and RUNNING while the write ran: {seen_then}"
    assert running_then, "the write ended before its START and RUNNING arrived"
    assert "COMPLETE" not in seen_then
    settle(emitter)

    events = lineage_receiver.jobs_writing(out)
    assert event_types(events) == ["START", "RUNNING", "COMPLETE"]
    assert [VALIDATOR.validate(e) for e in events] == [[]] * len(events)
    assert len({e["run"]["runId"] for e in events}) == 1
    assert len({e["job"]["name"] for e in events}) == 1
    start, complete = events[0], events[-1]
    # The START already knows the output and its schema from the plan; only the COMPLETE
    # has what the write measured.
    assert [f["name"] for f in start["outputs"][0]["facets"]["schema"]["fields"]] == ["id"]
    assert "outputFacets" not in start["outputs"][0]
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 2
    assert start["eventTime"] <= events[1]["eventTime"] <= complete["eventTime"]


@pytest.mark.skipif(
    int(pyspark.__version__.split(".")[0]) < 4,
    reason="Spark 3.5 posts no execution for a query that fails in analysis",
)
def test_reading_a_missing_path_is_a_fail_with_the_error_and_one_log_line_when_reported(
    spark: SparkSession,
    emitter: LineageEmitter,
    lineage_receiver: LineageReceiver,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def failed_reading(path: Path) -> list[dict[str, Any]]:
        return [
            e
            for e in lineage_receiver.events
            if str(path) in e["run"]["facets"].get("errorMessage", {}).get("message", "")
        ]

    # By default nothing, as from the official integration: the failed query has no output.
    unreported = tmp_path / "unreported"
    with pytest.raises(Exception, match="PATH_NOT_FOUND"):
        spark.read.parquet(str(unreported))
    settle(emitter)
    assert failed_reading(unreported) == []

    # With read-only actions reported (spark.openlineage.emitter.reportReadOnlyActions),
    # the failure is a run of its own. The shared session's listener is switched for this.
    listener = emitter._listener
    default_app = listener.app
    listener.app = dataclasses.replace(default_app, report_read_only_actions=True)
    missing = tmp_path / "missing"
    caplog.set_level(logging.INFO, logger="spark_emitter")
    caplog.clear()
    try:
        with pytest.raises(Exception, match="PATH_NOT_FOUND"):
            spark.read.parquet(str(missing))
        settle(emitter)
    finally:
        listener.app = default_app
    records = [r for r in caplog.records if r.name.startswith("spark_emitter")]

    [fail] = failed_reading(missing)
    events = [e for e in lineage_receiver.events if e["run"]["runId"] == fail["run"]["runId"]]
    assert [e["eventType"] for e in events] == ["START", "FAIL"]
    assert [VALIDATOR.validate(e) for e in events] == [[]] * len(events)
    error = fail["run"]["facets"]["errorMessage"]
    assert error["message"].startswith("[PATH_NOT_FOUND]")
    assert error["programmingLanguage"] == "JAVA"
    assert "AnalysisException" in error["stackTrace"]
    assert fail["job"]["name"] == "lineage_tests.execute_unresolved_data_source"
    assert fail["run"]["facets"]["parent"]["run"]["runId"] == emitter.app_run_id
    # The emitter says it on one line, with no traceback.
    assert len(records) == 1, [r.getMessage() for r in records]
    assert records[0].exc_info is None and "\n" not in records[0].getMessage()
    assert "PATH_NOT_FOUND" in records[0].getMessage()


KILLED_DRIVER = """
import sys, time
from pyspark.sql import SparkSession, functions as F
from spark_emitter import enable_lineage

spark = (SparkSession.builder.master("local[1]").appName("Killed Driver")
         .config("spark.ui.enabled", "false").getOrCreate())
enable_lineage(spark, url=sys.argv[1], namespace="kill-test")

def hold(value):
    import time
    time.sleep(120)  # bounded: ends by itself if anything outlives the test
    return value

held = F.udf(hold, "long", useArrow=False)("id").alias("id")
spark.range(1, numPartitions=1).select(held).write.parquet(sys.argv[2])
"""


@pytest.mark.slow
def test_driver_killed_mid_action_leaves_the_actions_start_and_running_delivered(
    tmp_path: Path,
) -> None:
    receiver = LineageReceiver()
    script, out = tmp_path / "killed_driver.py", tmp_path / "never_finished"
    script.write_text(KILLED_DRIVER)
    driver = subprocess.Popen(
        [sys.executable, str(script), receiver.url, str(out)],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "driver.log").open("w"),
        env={**os.environ, "PYTHONPATH": str(REPO)},
        start_new_session=True,  # its JVM and Python workers share its process group
    )
    try:
        live = wait_until(
            lambda: {"START", "RUNNING"} <= {e["eventType"] for e in receiver.jobs_writing(out)},
            within=180,
        )
        alive_at_kill = driver.poll() is None
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        # The driver is gone; end what it started (its JVM, the UDF's Python worker).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        receiver.close()
    log = (tmp_path / "driver.log").read_text()[-3000:]
    assert live, f"the action's START never arrived while it ran:\n{log}"
    assert alive_at_kill, f"the driver ended before it was killed:\n{log}"

    events = receiver.events
    action = receiver.jobs_writing(out)
    application = [e for e in events if e["job"]["name"] == "killed_driver"]
    # Produced before the kill: the application's START, the action's START, its RUNNING.
    produced = [("killed_driver", "START"), ("write", "START"), ("write", "RUNNING")]
    delivered = {("killed_driver", e["eventType"]) for e in application} | {
        ("write", e["eventType"]) for e in action
    }
    lost = [p for p in produced if p not in delivered]
    report(
        "test_driver_killed_mid_action_leaves_the_actions_start_and_running_delivered",
        produced_before_kill=len(produced),
        received=len(events),
        lost=len(lost),
    )
    assert lost == []
    assert [e["eventType"] for e in application] == ["START"]
    assert "COMPLETE" not in {e["eventType"] for e in action}
    assert {e["run"]["facets"]["parent"]["run"]["runId"] for e in action} == {
        application[0]["run"]["runId"]
    }
