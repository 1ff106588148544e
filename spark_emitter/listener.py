"""The Spark listener, implemented in Python and registered in the JVM through py4j.

Spark calls it on its listener bus thread (the shared queue, where the JVM's own
``QueryExecutionListener`` bus also runs), so it sees each SQL execution's start and end
in order with everything else and the application's end after the last execution's end.
The listener reads facts out of the JVM (:mod:`.plan_reader`), builds events
(:mod:`.events`) and hands them to the sender (:mod:`.delivery`), whose ``submit`` only
encodes and enqueues: the network is a background thread's business, so a slow or dead
endpoint never stalls Spark's listener bus.

When events go out follows the official integration (``SparkSQLExecutionContext``):

- START at ``SparkListenerSQLExecutionStart``. The official takes the running query's
  ``QueryExecution`` from ``SQLExecution.getQueryExecution(executionId)`` and builds the
  START with the full event builder (inputs, outputs, facets) from its plans; when that
  is gone (the execution already ended) it logs "No execution info" and sends nothing.
  Its container tests expect such a START to carry the inputs and outputs with their
  ``dataSource``, ``schema`` and ``symlinks`` facets and the COMPLETE's job name
  (``pysparkHadoopFSStartEvent.json``). We do the same read, so a START carries the
  inputs, outputs, schemas and column lineage of the plan (not the write's statistics,
  not the action's name, which only the end event has). Only writes are decided at
  start (but ALTER TABLE RENAME / ADD COLUMNS, whose table is reported as it is
  after); what is decided by the action's name (read-only actions, when reported) and
  executions whose plan was already gone get their START at the end, stamped with the
  real start time.
- RUNNING at each Spark job's start and end within the execution (the official sends
  one per ``SparkListenerJobStart``/``JobEnd`` once the START is out, and a RUNNING at a
  job's end may already carry ``outputStatistics``: ``pysparkOverwriteNameRunningEvent``);
  ours are throttled to one per ``running_interval`` seconds per action, the first one at
  once, and carry what the START does — statistics come with the COMPLETE.
- COMPLETE or FAIL (with the ``errorMessage`` facet) at ``SparkListenerSQLExecutionEnd``.

A driver killed mid-action thus leaves the action's START (and RUNNING) behind, and a
monitor sees a long action while it runs.

Why a SparkListener and not a ``QueryExecutionListener``: both get the same
``QueryExecution`` at the same moment (Spark's QueryExecutionListener bus is itself fed by
``SparkListenerSQLExecutionEnd``), but only the listener events carry the execution id,
its root execution id (to fold a command's nested executions into one job) and its start
time, and only a SparkListener sees the start of executions and jobs and the application
end — so one listener does it all.

Every callback is guarded: a failure to describe an execution is logged on one line
(the traceback at DEBUG) and dropped; it never reaches Spark.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from spark_emitter.delivery import EventSender
from spark_emitter.events import (
    ActionRun,
    AppContext,
    JobDetails,
    action_event,
    action_events,
    action_run,
    application_event,
    end_type,
    is_reported,
)
from spark_emitter.execution import ExecutionFacts
from spark_emitter.plan_reader import (
    CatalogContext,
    read_execution,
    read_finished_execution,
    read_outcome,
    read_started_execution,
)

__all__ = ["LineageListener"]

log = logging.getLogger(__name__)


def _ignore(*_args: Any) -> None:
    return None


def _property(properties: Any, key: str) -> str | None:
    value = properties.getProperty(key)
    return str(value) if value is not None else None


@dataclass
class _LiveAction:
    """An action whose START is out: its run, its plan's facts, when RUNNING last went."""

    run: ActionRun
    facts: ExecutionFacts
    last_running: float | None = None  # time.monotonic()


class LineageListener:
    """``org.apache.spark.scheduler.SparkListenerInterface`` for py4j."""

    class Java:
        implements = ["org.apache.spark.scheduler.SparkListenerInterface"]

    def __init__(
        self,
        app: AppContext,
        sender: EventSender,
        catalog: CatalogContext,
        jvm: Any,
        drain_timeout: float,
        running_interval: float = 10.0,
    ) -> None:
        self.app = app
        self._sender = sender
        self._catalog = catalog
        self._jvm = jvm
        self._drain_timeout = drain_timeout
        self._running_interval = running_interval
        self._starts: dict[int, tuple[int, int]] = {}  # execution id -> (start ms, root id)
        self._nested: dict[int, list[ExecutionFacts]] = {}  # root id -> finished nested runs
        self._live: dict[int, _LiveAction] = {}  # root execution id -> action with START out
        self._job_roots: dict[int, int] = {}  # Spark job id -> root execution id
        self._finished = threading.Event()
        self._lock = threading.Lock()
        self.failures = 0  # callbacks that raised and were swallowed

    # py4j looks methods up by name; every listener method we do not care about is a no-op.
    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("on"):
            return _ignore
        raise AttributeError(name)

    def start(self, start_ms: int) -> None:
        """Announce the application run (its START), from the registering thread."""
        self._sender.submit(application_event(self.app, "START", start_ms))

    def onOtherEvent(self, event: Any) -> None:
        if self._finished.is_set():
            return
        with self._guard("describe a Spark execution"):
            kind = str(event.getClass().getSimpleName())
            if kind == "SparkListenerSQLExecutionStart":
                self._on_execution_start(event)
            elif kind == "SparkListenerSQLExecutionEnd":
                self._on_execution_end(event)

    def onJobStart(self, event: Any) -> None:
        if self._finished.is_set() or not self._live:
            return
        with self._guard("report a running action"):
            properties = event.properties()
            execution = properties.getProperty("spark.sql.execution.id") if properties else None
            if execution is None:
                return
            execution_id = int(execution)
            root_id = self._starts.get(execution_id, (0, execution_id))[1]
            if root_id in self._live:
                job_id = int(event.jobId())
                self._job_roots[job_id] = root_id
                details = JobDetails(
                    job_id,
                    _property(properties, "spark.job.description"),
                    _property(properties, "spark.jobGroup.id"),
                    _property(properties, "callSite.short"),
                )
                self._running(root_id, int(event.time()), details)

    def onJobEnd(self, event: Any) -> None:
        if not self._job_roots:
            return
        with self._guard("report a running action"):
            root_id = self._job_roots.pop(int(event.jobId()), None)
            if root_id is not None and not self._finished.is_set():
                self._running(root_id, int(event.time()))

    def onApplicationEnd(self, event: Any) -> None:
        with self._guard("report the application end"):
            self.finish(int(event.time()))

    def finish(self, end_ms: int | None = None, error: str | None = None) -> bool:
        """Send the application's COMPLETE (or FAIL) once and drain the sender."""
        with self._lock:
            if self._finished.is_set():
                return True
            self._finished.set()
        end = end_ms if end_ms is not None else int(time.time() * 1000)
        self._sender.submit(
            application_event(self.app, "FAIL" if error else "COMPLETE", end, error)
        )
        return self._sender.close(self._drain_timeout)

    @property
    def finished(self) -> bool:
        return self._finished.is_set()

    @contextlib.contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        """Swallow and count a callback's failure, logged on one line (traceback at DEBUG)."""
        try:
            yield
        except Exception as error:
            self.failures += 1
            lines = str(error).strip().splitlines()
            log.warning("openlineage: could not %s: %s", what, lines[0] if lines else repr(error))
            log.debug("openlineage: could not %s", what, exc_info=True)

    def _on_execution_start(self, event: Any) -> None:
        execution_id = int(event.executionId())
        root = event.rootExecutionId()
        root_id = int(root.get()) if root.isDefined() else execution_id
        self._starts[execution_id] = (int(event.time()), root_id)
        if root_id != execution_id:
            return  # part of a bigger command, whose START is out already
        facts = read_started_execution(event, self._catalog, self._jvm)
        # Only a write is known to be reported before the action's name is (at the end).
        if facts is None or facts.write is None:
            return
        live = _LiveAction(action_run(self.app, facts), facts)
        self._live[execution_id] = live
        self._sender.submit(action_event(self.app, live.run, facts, "START", facts.start_ms))

    def _running(self, root_id: int, time_ms: int, job: JobDetails | None = None) -> None:
        live = self._live[root_id]
        now = time.monotonic()
        if live.last_running is not None and now - live.last_running < self._running_interval:
            return
        live.last_running = now
        self._sender.submit(action_event(self.app, live.run, live.facts, "RUNNING", time_ms, job))

    def _on_execution_end(self, event: Any) -> None:
        execution_id = int(event.executionId())
        start_ms, root_id = self._starts.pop(execution_id, (None, execution_id))
        live = self._live.pop(execution_id, None)
        if live is not None:
            self._end_live(live, event)
            return
        facts = read_execution(event, start_ms, self._catalog, self._jvm)
        if facts is None:
            return
        if root_id != execution_id:
            # Part of a bigger command (the write inside CREATE TABLE AS SELECT): its
            # statistics belong to that command's job, which ends after it.
            self._nested.setdefault(root_id, []).append(facts)
            return
        self._add_nested_statistics(facts)
        if is_reported(self.app, facts):
            if facts.analysis_failed:
                log.info(
                    "openlineage: execution %d failed in analysis, reported as FAIL: %s",
                    execution_id,
                    (facts.error or "").strip().split("\n", 1)[0],
                )
            for lineage_event in action_events(self.app, facts):
                self._sender.submit(lineage_event)

    def _end_live(self, live: _LiveAction, event: Any) -> None:
        """COMPLETE or FAIL of an announced run. Its plan was read at the start; the end
        adds the outcome and the statistics. If even those cannot be read, the run still
        ends, with the outcome alone."""
        try:
            facts = read_finished_execution(event, live.facts, self._jvm)
        except Exception:
            error, stack = read_outcome(event, self._jvm)
            facts = dataclasses.replace(
                live.facts, end_ms=int(event.time()), error=error, stack_trace=stack
            )
            self._sender.submit(
                action_event(self.app, live.run, facts, end_type(facts), facts.end_ms)
            )
            raise
        self._add_nested_statistics(facts)
        self._sender.submit(action_event(self.app, live.run, facts, end_type(facts), facts.end_ms))

    def _add_nested_statistics(self, facts: ExecutionFacts) -> None:
        """A command's statistics measured by the write nested in it, when it has none."""
        for nested in self._nested.pop(facts.execution_id, []):
            if facts.rows is None and nested.rows is not None:
                facts.rows, facts.bytes, facts.files = nested.rows, nested.bytes, nested.files
