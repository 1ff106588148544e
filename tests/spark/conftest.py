"""One local-mode SparkSession for every Spark test, with the emitter enabled.

A JVM start costs 10 to 20 s, so the whole suite shares one session (``local[2]``, UI off,
few shuffle partitions). Its events go to :class:`LineageReceiver`, a real HTTP server on
loopback; tests tell their own events apart by the unique paths they write.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_emitter import LineageEmitter, enable_lineage
from tests.support.tiers import starts


class LineageReceiver:
    """Records every event POSTed to it; answers like the proxy (200)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.requests: list[tuple[str, dict[str, str]]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append((self.path, dict(self.headers)))
                receiver.events.append(json.loads(body))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b'{"status":"success"}')

            def log_message(self, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def jobs_writing(self, path: Path | str) -> list[dict[str, Any]]:
        """Events of the jobs whose output dataset is ``path``."""
        return [e for e in self.events if any(o["name"] == str(path) for o in e.get("outputs", []))]

    def jobs_reading(self, path: Path | str) -> list[dict[str, Any]]:
        return [e for e in self.events if any(i["name"] == str(path) for i in e.get("inputs", []))]


@pytest.fixture(scope="session")
def lineage_receiver() -> Iterator[LineageReceiver]:
    receiver = LineageReceiver()
    yield receiver
    receiver.close()


@pytest.fixture(scope="session")
@starts("a SparkSession (a JVM)")
def spark_session(
    tmp_path_factory: pytest.TempPathFactory, lineage_receiver: LineageReceiver
) -> Iterator[tuple[SparkSession, LineageEmitter]]:
    warehouse = tmp_path_factory.mktemp("warehouse")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("Lineage Tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.extraJavaOptions", "-Dderby.system.home=" + str(warehouse))
        # Undelivered events would wait here, not in the user's ~/.cache.
        .config("spark.openlineage.emitter.buffer.directory", str(warehouse / "lineage-buffer"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("FATAL")
    emitter = enable_lineage(spark, url=lineage_receiver.url, namespace="spark-tests", environ={})
    assert emitter is not None
    yield spark, emitter
    spark.stop()


@pytest.fixture
def spark(spark_session: tuple[SparkSession, LineageEmitter]) -> SparkSession:
    return spark_session[0]


@pytest.fixture
def emitter(spark_session: tuple[SparkSession, LineageEmitter]) -> LineageEmitter:
    return spark_session[1]


def settle(emitter: LineageEmitter) -> None:
    """Wait until Spark's listener bus has delivered everything and it was sent."""
    # The receiver records an event before it answers, so once sent it is there.
    assert emitter.flush(timeout=30), "events were not delivered in time"


def wait_until(check: Callable[[], bool], within: float) -> bool:
    """Poll ``check`` until it holds or ``within`` seconds passed; whether it held."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def event_types(events: list[dict[str, Any]]) -> list[str]:
    """The run's event types with its RUNNING events (how many depends on the machine's
    speed: one per Spark job start/end, throttled) folded into one."""
    types = [e["eventType"] for e in events]
    return [t for i, t in enumerate(types) if t != "RUNNING" or types[i - 1] != "RUNNING"]


def column_edges(
    output: dict[str, Any], column: str | None, kind: str | None = None
) -> set[tuple[str, str, str]]:
    """(input file name, field, TYPE/SUBTYPE) of an output's column lineage: of ``column``,
    or of the dataset-level inputs when ``column`` is None; only DIRECT or INDIRECT ones
    if ``kind`` says so."""
    facet = output["facets"]["columnLineage"]
    inputs = facet["dataset"] if column is None else facet["fields"][column]["inputFields"]
    return {
        (Path(f["name"]).name, f["field"], f"{t['type']}/{t['subtype']}")
        for f in inputs
        for t in f["transformations"]
        if kind is None or t["type"] == kind
    }


def schema_fields(dataset: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, type) of a dataset's ``schema`` facet."""
    return [(f["name"], f["type"]) for f in dataset["facets"]["schema"]["fields"]]


def table_symlink(dataset: dict[str, Any]) -> tuple[str, str, str]:
    """(namespace, name, type) of a dataset's one ``symlinks`` identifier."""
    (identifier,) = dataset["facets"]["symlinks"]["identifiers"]
    return identifier["namespace"], identifier["name"], identifier["type"]


def completed(events: list[dict[str, Any]], job: str) -> dict[str, Any]:
    """The last event of ``job``, which must be its COMPLETE."""
    runs = [e for e in events if e["job"]["name"] == job]
    names = sorted({e["job"]["name"] for e in events})
    assert [e["eventType"] for e in runs][-1:] == ["COMPLETE"], (job, names)
    return runs[-1]
