"""The emitter's disk buffer: events the proxy could not take wait on disk, in order, and
reach it when it is back — later in the same application, at the next application's
start, or through ``python -m spark_emitter.buffer send``. A real HTTP server on loopback
plays the proxy; "down" is a port nobody listens on, "back" is the server bound to it."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from proxy.server.embedded_broker import free_port
from spark_emitter.buffer import DiskBuffer
from spark_emitter.delivery import EventSender, open_client
from tests.support.paths import REPO
from tests.support.waiting import wait_until
from tests.unit.spark_emitter.test_delivery import ScriptedEndpoint, _facet, lineage_event


def _endpoint_on(port: int) -> ScriptedEndpoint:
    """The proxy coming back on the port the sender was told about."""
    return ScriptedEndpoint(port=port)


def _sender(
    url: str, directory: Path, owner: str, max_bytes: int = 1 << 20, retry_interval: float = 0.05
) -> EventSender:
    transport = {"type": "http", "url": url, "retry": {"total": 1, "backoff_factor": 0.01}}
    client = open_client(transport)
    assert client is not None
    buffer = DiskBuffer(directory, owner, max_bytes)
    return EventSender(client, buffer=buffer, retry_interval=retry_interval)


def _lines(directory: Path) -> int:
    return sum(1 for f in directory.glob("*.jsonl") for _ in f.open())


def _said_at_stop(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    """The emitter's exit lines at ``level`` (not the failed sends' warnings)."""
    return [
        message
        for r in caplog.records
        if r.name == "spark_emitter.delivery"
        and r.levelno == level
        and "at stop" in (message := r.getMessage())
    ]


def _retry_held(endpoint: ScriptedEndpoint, directory: Path) -> EventSender:
    """A sender whose 5 events wait on disk (``endpoint`` answering 503 to everything),
    with a retry of them under way and held by ``endpoint`` until its ``release``."""
    endpoint.script = [503] * 10_000  # down: every request fails, after its one retry too
    sender = _sender(endpoint.url, directory, "app-1", retry_interval=0.05)
    for n in range(5):
        sender.submit(lineage_event(n))
    wait_until(lambda: sender.stats.buffered == 5, within=60)
    endpoint.release.clear()
    wait_until(lambda: endpoint.held == 1, within=60)
    return sender


def _names(endpoint: ScriptedEndpoint) -> list[str]:
    return [body["job"]["name"] for _, _, body in endpoint.received]


def test_events_sent_while_the_proxy_is_down_arrive_in_order_when_it_is_back(
    tmp_path: Path,
) -> None:
    port = free_port()
    sender = _sender(f"http://127.0.0.1:{port}", tmp_path, "app-1")
    for n in range(20):
        assert sender.submit(lineage_event(n))
    wait_until(lambda: sender.stats.buffered == 20, within=60)
    assert sender.stats.sent == sender.stats.failed == 0
    endpoint = _endpoint_on(port)
    try:
        assert sender.flush(timeout=60)
        assert sender.close(timeout=10)
    finally:
        endpoint.stop()
    assert _names(endpoint) == [f"app.write_{n}" for n in range(20)]
    assert (sender.stats.sent, sender.stats.failed, sender.stats.dropped) == (20, 0, 0)
    assert list(tmp_path.iterdir()) == []  # all delivered: nothing left behind


def test_what_an_application_left_is_sent_first_at_the_next_ones_start(tmp_path: Path) -> None:
    port = free_port()
    first = _sender(f"http://127.0.0.1:{port}", tmp_path, "app-1")
    for n in range(5):
        first.submit(lineage_event(n))
    wait_until(lambda: first.stats.buffered >= 1, within=60)
    # Down at its end: close hands the rest to the disk instead of waiting for the proxy.
    assert not first.close(timeout=600)
    assert first.stats.buffered == 5
    assert [p.name for p in tmp_path.glob("*.jsonl")] == ["app-1.jsonl"]
    # The first application's process ends here. Its sender thread may still be in the
    # client's own retries of the event in flight (handed to disk too); alive, it could
    # deliver that copy once the endpoint listens on the port (seen once in CI: write_2
    # first, then 0..4). A process that exited sends nothing more: wait for the thread.
    first._thread.join(timeout=60)
    assert not first._thread.is_alive()

    endpoint = _endpoint_on(port)
    try:
        second = _sender(endpoint.url, tmp_path, "app-2")
        second.submit(lineage_event(100))
        assert second.flush(timeout=60)
        assert second.close(timeout=10)
    finally:
        endpoint.stop()
    assert _names(endpoint) == [f"app.write_{n}" for n in [0, 1, 2, 3, 4, 100]]
    assert list(tmp_path.iterdir()) == []


def test_a_refused_event_is_not_buffered_and_holds_nothing_up(tmp_path: Path) -> None:
    endpoint = ScriptedEndpoint()
    endpoint.script = [400]
    try:
        sender = _sender(endpoint.url, tmp_path, "app-1")
        sender.submit(lineage_event(1))
        sender.submit(lineage_event(2))
        assert sender.close(timeout=10)
    finally:
        endpoint.stop()
    assert _names(endpoint) == ["app.write_1", "app.write_2"]
    assert (sender.stats.sent, sender.stats.failed, sender.stats.buffered) == (1, 1, 0)


def test_a_full_buffer_drops_and_counts_instead_of_growing(tmp_path: Path) -> None:
    one_event = len(str(lineage_event(0)))
    sender = _sender(f"http://127.0.0.1:{free_port()}", tmp_path, "app-1", one_event * 3)
    for n in range(10):
        sender.submit(lineage_event(n))
    wait_until(lambda: sender.stats.buffered + sender.stats.dropped == 10, within=60)
    sender.close(timeout=1)
    assert 1 <= sender.stats.buffered <= 3
    assert sender.stats.dropped == 10 - sender.stats.buffered
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= one_event * 3


def test_the_send_command_delivers_what_applications_left(tmp_path: Path) -> None:
    port = free_port()
    first = _sender(f"http://127.0.0.1:{port}", tmp_path, "app-1")
    for n in range(3):
        first.submit(lineage_event(n))
    wait_until(lambda: first.stats.buffered >= 1, within=60)
    first.close(timeout=1)
    endpoint = _endpoint_on(port)
    try:
        env = {**os.environ, "OPENLINEAGE_URL": endpoint.url, "PYTHONPATH": str(REPO)}
        done = subprocess.run(
            [sys.executable, "-m", "spark_emitter.buffer", "send", str(tmp_path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        endpoint.stop()
    assert done.returncode == 0, done.stderr
    assert "3 event(s) sent" in done.stdout
    assert _names(endpoint) == ["app.write_0", "app.write_1", "app.write_2"]
    assert list(tmp_path.iterdir()) == []


def test_an_application_event_is_buffered_exactly_as_built(tmp_path: Path) -> None:
    """The application's START has no parent facet; the client adds its tags facet to the
    run facets it is given — never to our event, which must still be written as JSON."""
    event = lineage_event(0, "START")
    event["run"]["facets"] = {
        "processing_engine": _facet(
            "ProcessingEngineRunFacet", "1-1-1", openlineageAdapterVersion="1"
        )
    }
    sender = _sender(f"http://127.0.0.1:{free_port()}", tmp_path, "app-1")
    sender.submit(event)
    wait_until(lambda: sender.stats.buffered == 1, within=60)
    sender.close(timeout=1)
    (kept,) = [json.loads(line) for line in (tmp_path / "app-1.jsonl").open()]
    assert kept == event


# Long enough that no retry of the sender's own comes during a test: what the buffer
# delivers, close() delivered.
_NO_RETRY_BEFORE_STOP = 3600.0


def test_stop_drains_the_buffer_when_the_proxy_is_back_before_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 38 item 4: the proxy back shortly before the driver stops, events waiting on
    disk. The old close() did not wait at all when events were on disk: none of them was
    delivered at stop (close returned False, all 21 left on disk). Now it tries them at
    once and every event arrives, in order, the COMPLETE submitted at stop last, and the
    exit line counts what was on disk."""
    caplog.set_level(logging.INFO, logger="spark_emitter.delivery")
    port = free_port()
    sender = _sender(
        f"http://127.0.0.1:{port}", tmp_path, "app-1", retry_interval=_NO_RETRY_BEFORE_STOP
    )
    for n in range(20):
        sender.submit(lineage_event(n))
    wait_until(lambda: sender.stats.buffered == 20, within=60)
    assert _lines(tmp_path) == 20
    endpoint = _endpoint_on(port)
    try:
        sender.submit(lineage_event(20, "COMPLETE"))  # what the listener submits at stop
        started = time.monotonic()
        assert sender.close(timeout=30)
        took = time.monotonic() - started
    finally:
        endpoint.stop()
    assert _names(endpoint) == [f"app.write_{n}" for n in range(21)]
    assert (sender.stats.sent, sender.stats.failed, sender.stats.dropped) == (21, 0, 0)
    assert list(tmp_path.iterdir()) == []
    assert _said_at_stop(caplog, logging.WARNING) == []
    (line,) = _said_at_stop(caplog, logging.INFO)
    assert "the 20 event(s) waiting on disk at stop were delivered, none left" in line
    assert took < 10, took  # no retry interval waited for


def test_stop_with_the_proxy_still_down_says_what_is_left_on_disk_and_where(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The exit line counts the events on disk — an earlier application's and this one's,
    per file — not only those still queued at stop (the old line said "0 event(s) kept"
    with 7 on disk). Stopping costs one failed try, not the whole drain timeout."""
    caplog.set_level(logging.INFO, logger="spark_emitter.delivery")
    port = free_port()
    first = _sender(f"http://127.0.0.1:{port}", tmp_path, "app-1")
    for n in range(3):
        first.submit(lineage_event(n))
    wait_until(lambda: first.stats.buffered == 3, within=60)
    assert not first.close(timeout=30)
    first._thread.join(timeout=60)
    caplog.clear()

    second = _sender(
        f"http://127.0.0.1:{port}", tmp_path, "app-2", retry_interval=_NO_RETRY_BEFORE_STOP
    )
    for n in range(3, 7):
        second.submit(lineage_event(n))
    wait_until(lambda: second.stats.buffered == 4, within=60)
    started = time.monotonic()
    assert not second.close(timeout=30)
    assert time.monotonic() - started < 10
    assert _lines(tmp_path) == 7
    (line,) = _said_at_stop(caplog, logging.WARNING)
    assert f"7 event(s) not delivered at stop, kept on disk in {tmp_path}" in line
    assert "app-1.jsonl: 3, app-2.jsonl: 4" in line
    assert f"python -m spark_emitter.buffer send {tmp_path}" in line


def test_stop_tries_again_after_a_send_under_way_when_it_began_fails(tmp_path: Path) -> None:
    """A retry began while the proxy was still failing (503) and fails after the stop
    began: the proxy may have come back in between, so the stop tries again at once, and
    every event arrives. Failed on the old code (close did not wait at all with events on
    disk) and on a first fix that ended the drain at any failure during it."""
    endpoint = ScriptedEndpoint()
    try:
        sender = _retry_held(endpoint, tmp_path)
        endpoint.script = [503, 503]  # it fails (and its own retry); then the proxy is back
        closed: list[bool] = []
        stopping = threading.Thread(target=lambda: closed.append(sender.close(timeout=30)))
        stopping.start()
        wait_until(lambda: sender._draining_since is not None, within=10)
        endpoint.release.set()
        stopping.join(timeout=60)
    finally:
        endpoint.stop()
    assert closed == [True]
    assert _names(endpoint)[-5:] == [f"app.write_{n}" for n in range(5)]
    assert (sender.stats.sent, sender.stats.failed, sender.stats.dropped) == (5, 0, 0)
    assert list(tmp_path.iterdir()) == []


def test_stop_with_the_proxy_still_down_keeps_every_queued_event_on_disk(tmp_path: Path) -> None:
    """Events queued behind a send that hangs through the whole stop: all of them end on
    disk, with those already there. Failed (found by CI, where the sender thread lost the
    race to the stop) on the code that handed the drain's own "retry now" marker to the
    disk buffer as an event: a TypeError (``Object of type object is not JSON
    serializable``) in the middle of the hand-over, and the events after it lost."""
    endpoint = ScriptedEndpoint()
    try:
        sender = _retry_held(endpoint, tmp_path)  # the proxy stays down, the retry hangs
        for n in range(5, 9):
            sender.submit(lineage_event(n))  # queued behind it
        closed = sender.close(timeout=1)  # the drain waits in vain; the rest goes to disk
    finally:
        endpoint.release.set()
        endpoint.stop()
    assert not closed
    assert _lines(tmp_path) == 9
    assert (sender.stats.failed, sender.stats.dropped) == (0, 0)
