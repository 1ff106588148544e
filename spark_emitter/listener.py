"""The Spark listener, implemented in Python and registered in the JVM through py4j.

Spark calls it on its listener bus thread (the shared queue, where the JVM's own
``QueryExecutionListener`` bus also runs), so it sees each SQL execution's start and end
in order with everything else and the application's end after the last execution's end.
At an execution's end the event carries the ``QueryExecution``; the listener reads the
facts out of it (:mod:`.plan_reader`), builds events (:mod:`.events`) and hands them to
the sender (:mod:`.delivery`) — it never does network I/O on the bus thread.

Why a SparkListener and not a ``QueryExecutionListener``: both get the same
``QueryExecution`` at the same moment (Spark's QueryExecutionListener bus is itself fed by
``SparkListenerSQLExecutionEnd``), but only the listener events carry the execution id,
its root execution id (to fold a command's nested executions into one job) and its start
time, and only a SparkListener sees the application end — so one listener does it all.

Every callback is guarded: a failure to describe an execution is logged and dropped; it
never reaches Spark.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from spark_emitter.delivery import EventSender
from spark_emitter.events import AppContext, action_events, application_event, is_reported
from spark_emitter.execution import ExecutionFacts
from spark_emitter.plan_reader import CatalogContext, read_execution

__all__ = ["LineageListener"]

log = logging.getLogger(__name__)


def _ignore(*_args: Any) -> None:
    return None


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
    ) -> None:
        self.app = app
        self._sender = sender
        self._catalog = catalog
        self._jvm = jvm
        self._drain_timeout = drain_timeout
        self._starts: dict[int, tuple[int, int]] = {}  # execution id -> (start ms, root id)
        self._nested: dict[int, list[ExecutionFacts]] = {}  # root id -> finished nested runs
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
        try:
            kind = str(event.getClass().getSimpleName())
            if kind == "SparkListenerSQLExecutionStart":
                self._on_execution_start(event)
            elif kind == "SparkListenerSQLExecutionEnd":
                self._on_execution_end(event)
        except Exception:
            self.failures += 1
            log.warning("openlineage: could not describe a Spark execution", exc_info=True)

    def onApplicationEnd(self, event: Any) -> None:
        try:
            self.finish(int(event.time()))
        except Exception:
            self.failures += 1
            log.warning("openlineage: could not report the application end", exc_info=True)

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

    def _on_execution_start(self, event: Any) -> None:
        execution_id = int(event.executionId())
        root = event.rootExecutionId()
        root_id = int(root.get()) if root.isDefined() else execution_id
        self._starts[execution_id] = (int(event.time()), root_id)

    def _on_execution_end(self, event: Any) -> None:
        execution_id = int(event.executionId())
        start_ms, root_id = self._starts.pop(execution_id, (None, execution_id))
        facts = read_execution(event, start_ms, self._catalog, self._jvm)
        if facts is None:
            return
        if root_id != execution_id:
            # Part of a bigger command (the write inside CREATE TABLE AS SELECT): its
            # statistics belong to that command's job, which ends after it.
            self._nested.setdefault(root_id, []).append(facts)
            return
        for nested in self._nested.pop(execution_id, []):
            if facts.rows is None and nested.rows is not None:
                facts.rows, facts.bytes, facts.files = nested.rows, nested.bytes, nested.files
        if is_reported(self.app, facts):
            for lineage_event in action_events(self.app, facts):
                self._sender.submit(lineage_event)
