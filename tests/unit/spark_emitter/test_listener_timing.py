"""When the listener sends an action's events, driven by stand-ins for Spark's listener
events (no JVM): START at the execution's start, RUNNING on its Spark jobs at most once per
interval, the end at its end — and a nested execution's jobs count for their command."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from spark_emitter.events import AppContext
from spark_emitter.execution import ExecutionFacts, WriteFacts
from spark_emitter.listener import LineageListener
from spark_emitter.run_ids import uuid7

APP = AppContext(namespace="ns", app_name="etl", app_run_id=uuid7(), spark_version="4.0")
WRITE = ExecutionFacts(
    1,
    "unknown",
    "Execute InsertIntoHadoopFsRelationCommand",
    1_000,
    1_000,
    None,
    write=WriteFacts(("file", "/out/daily")),
)


class SenderDouble:
    """Keeps what the listener submits, like the real sender's queue would."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def submit(self, event: dict[str, Any]) -> bool:
        self.events.append(event)
        return True


class Option:
    def __init__(self, value: Any = None) -> None:
        self.value = value

    def isDefined(self) -> bool:
        return self.value is not None

    def get(self) -> Any:
        return self.value


class SparkEvent:
    """A listener event: the accessors the listener calls, answering fixed values."""

    def __init__(self, kind: str, **values: Any) -> None:
        self.kind, self.values = kind, values

    def getClass(self) -> Any:
        return type("Class", (), {"getSimpleName": lambda _: self.kind})()

    def __getattr__(self, name: str) -> Any:
        return lambda: self.values[name]


class Properties(dict):
    def getProperty(self, key: str) -> str | None:
        return self.get(key)


def execution_start(execution_id: int, root_id: int | None = None) -> SparkEvent:
    return SparkEvent(
        "SparkListenerSQLExecutionStart",
        executionId=execution_id,
        rootExecutionId=Option(root_id),
        time=1_000,
    )


def job(kind: str, job_id: int, execution_id: int, time_ms: int) -> SparkEvent:
    properties = Properties({"spark.sql.execution.id": str(execution_id)})
    return SparkEvent(kind, jobId=job_id, properties=properties, time=time_ms)


@pytest.fixture
def sender(monkeypatch: pytest.MonkeyPatch) -> SenderDouble:
    monkeypatch.setattr(
        "spark_emitter.listener.read_started_execution",
        lambda event, *_: dataclasses.replace(WRITE, execution_id=event.executionId()),
    )
    monkeypatch.setattr(
        "spark_emitter.listener.read_execution",
        lambda event, start_ms, *_: dataclasses.replace(
            WRITE, execution_id=event.executionId(), action="command", end_ms=9_000
        ),
    )
    monkeypatch.setattr(
        "spark_emitter.listener.read_finished_execution",
        lambda event, started, _jvm: dataclasses.replace(started, action="command", end_ms=9_000),
    )
    return SenderDouble()


def listener(sender: SenderDouble, running_interval: float) -> LineageListener:
    return LineageListener(APP, sender, None, None, 1.0, running_interval)  # type: ignore[arg-type]


def end(execution_id: int) -> SparkEvent:
    return SparkEvent("SparkListenerSQLExecutionEnd", executionId=execution_id, time=9_000)


def test_start_goes_at_the_execution_start_and_the_first_job_start_is_running(
    sender: SenderDouble,
) -> None:
    spark = listener(sender, running_interval=3600)
    spark.onOtherEvent(execution_start(1))
    assert [e["eventType"] for e in sender.events] == ["START"]
    spark.onJobStart(job("SparkListenerJobStart", 10, 1, 2_000))
    spark.onJobEnd(job("SparkListenerJobEnd", 10, 1, 3_000))  # within the interval
    spark.onJobStart(job("SparkListenerJobStart", 11, 1, 4_000))
    spark.onOtherEvent(end(1))
    assert [e["eventType"] for e in sender.events] == ["START", "RUNNING", "COMPLETE"]
    assert len({e["run"]["runId"] for e in sender.events}) == 1
    assert spark.failures == 0


def test_every_job_event_is_running_when_the_interval_has_passed(sender: SenderDouble) -> None:
    spark = listener(sender, running_interval=0)
    spark.onOtherEvent(execution_start(1))
    spark.onJobStart(job("SparkListenerJobStart", 10, 1, 2_000))
    spark.onJobEnd(job("SparkListenerJobEnd", 10, 1, 3_000))
    spark.onOtherEvent(end(1))
    assert [e["eventType"] for e in sender.events] == ["START", "RUNNING", "RUNNING", "COMPLETE"]


def test_jobs_of_a_nested_execution_are_running_of_the_command_that_holds_it(
    sender: SenderDouble,
) -> None:
    spark = listener(sender, running_interval=0)
    spark.onOtherEvent(execution_start(1))
    spark.onOtherEvent(execution_start(2, root_id=1))  # the write inside CREATE TABLE AS
    spark.onJobStart(job("SparkListenerJobStart", 10, 2, 2_000))
    spark.onOtherEvent(end(2))
    spark.onOtherEvent(end(1))
    assert [e["eventType"] for e in sender.events] == ["START", "RUNNING", "COMPLETE"]


def test_spark_jobs_outside_sql_executions_send_nothing(sender: SenderDouble) -> None:
    spark = listener(sender, running_interval=0)
    spark.onJobStart(SparkEvent("SparkListenerJobStart", jobId=1, properties=Properties()))
    spark.onOtherEvent(execution_start(1))
    spark.onJobStart(SparkEvent("SparkListenerJobStart", jobId=2, properties=Properties(), time=1))
    assert [e["eventType"] for e in sender.events] == ["START"]
    assert spark.failures == 0


def test_an_announced_run_still_ends_when_its_end_cannot_be_read(
    sender: SenderDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: Any) -> None:
        raise RuntimeError("plan reader bug")

    monkeypatch.setattr("spark_emitter.listener.read_finished_execution", broken)
    monkeypatch.setattr("spark_emitter.listener.read_outcome", lambda *_: ("task failed", None))
    spark = listener(sender, running_interval=0)
    spark.onOtherEvent(execution_start(1))
    spark.onOtherEvent(end(1))
    assert [e["eventType"] for e in sender.events] == ["START", "FAIL"]
    assert sender.events[1]["run"]["facets"]["errorMessage"]["message"] == "task failed"
    assert sender.events[1]["eventTime"].endswith("09.000Z")  # the end event's time
    assert spark.failures == 1
