"""Which executions become jobs: the official integration filters plans with no output."""

from __future__ import annotations

import pytest

from spark_emitter.events import AppContext, is_reported
from spark_emitter.execution import ExecutionFacts, ReadFacts, WriteFacts

DEFAULT = AppContext(namespace="ns", app_name="etl", app_run_id="r", spark_version="4.0")
REPORTING = AppContext(
    namespace="ns",
    app_name="etl",
    app_run_id="r",
    spark_version="4.0",
    report_read_only_actions=True,
)
READ = [ReadFacts("LogicalRelation", ("file", "/in/orders"))]


def _facts(action: str, write: WriteFacts | None = None) -> ExecutionFacts:
    return ExecutionFacts(1, action, "AdaptiveSparkPlan", 0, 1, None, reads=READ, write=write)


@pytest.mark.parametrize("action", ["count", "collect", "toPandas"])
def test_read_only_actions_are_not_jobs_by_default(action: str) -> None:
    assert not is_reported(DEFAULT, _facts(action))


@pytest.mark.parametrize("action", ["count", "collect"])
def test_read_only_actions_are_jobs_when_turned_on(action: str) -> None:
    assert is_reported(REPORTING, _facts(action))


@pytest.mark.parametrize("app", [DEFAULT, REPORTING])
def test_writes_are_always_jobs_and_display_actions_never(app: AppContext) -> None:
    assert is_reported(app, _facts("command", WriteFacts(("file", "/out"))))
    assert not is_reported(app, _facts("show"))
    assert not is_reported(app, _facts("first"))
