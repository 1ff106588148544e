"""EventSender against a real HTTP server on loopback: retries, auth, bounds, draining."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from proxy.destinations.retry import RetryConfig
from spark_emitter.delivery import EventSender

QUICK = RetryConfig(max_attempts=6, initial_backoff_seconds=0.01)


class ScriptedEndpoint:
    """Answers each POST with the next status of ``script`` (then 200), recording requests."""

    def __init__(self) -> None:
        self.script: list[int] = []
        self.received: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.release = threading.Event()
        self.release.set()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                endpoint.release.wait(10)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.received.append((self.path, dict(self.headers), body))
                status = endpoint.script.pop(0) if endpoint.script else 200
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        # A short poll interval: shutdown() waits for the serving loop's next poll, 0.5 s
        # by default, which would be most of these tests' time.
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        ).start()


@pytest.fixture
def endpoint() -> Iterator[ScriptedEndpoint]:
    running = ScriptedEndpoint()
    yield running
    running.release.set()
    running.server.shutdown()
    running.server.server_close()


def test_posts_json_to_the_lineage_path_under_a_prefixed_url_with_bearer_key(
    endpoint: ScriptedEndpoint,
) -> None:
    sender = EventSender(endpoint.url + "/proxy/", api_key="s3cret")
    sender.submit({"eventType": "START"})
    assert sender.close(timeout=10)
    path, headers, body = endpoint.received[0]
    assert path == "/proxy/api/v1/lineage"
    assert headers["Authorization"] == "Bearer s3cret"
    assert headers["Content-Type"] == "application/json"
    assert body == {"eventType": "START"}
    assert (sender.stats.sent, sender.stats.failed) == (1, 0)


def test_retries_5xx_until_accepted(endpoint: ScriptedEndpoint) -> None:
    endpoint.script = [503, 500, 502]
    sender = EventSender(endpoint.url, retry=QUICK)
    sender.submit({"n": 1})
    assert sender.close(timeout=10)
    assert len(endpoint.received) == 4
    assert (sender.stats.sent, sender.stats.failed) == (1, 0)


def test_does_not_retry_a_rejected_event(endpoint: ScriptedEndpoint) -> None:
    endpoint.script = [400]
    sender = EventSender(endpoint.url, retry=QUICK)
    sender.submit({"n": 1})
    sender.submit({"n": 2})
    assert sender.close(timeout=10)
    assert [body["n"] for _, _, body in endpoint.received] == [1, 2]
    assert (sender.stats.sent, sender.stats.failed) == (1, 1)


def test_gives_up_after_the_retry_budget(endpoint: ScriptedEndpoint) -> None:
    endpoint.script = [503] * 10
    sender = EventSender(
        endpoint.url, retry=RetryConfig(max_attempts=3, initial_backoff_seconds=0.01)
    )
    sender.submit({"n": 1})
    assert sender.close(timeout=10)
    assert len(endpoint.received) == 3
    assert sender.stats.failed == 1


def test_unreachable_endpoint_counts_a_failure_and_never_raises() -> None:
    sender = EventSender(
        "http://127.0.0.1:9",
        retry=RetryConfig(max_attempts=2, initial_backoff_seconds=0.01),
        timeout=1,
    )
    assert sender.submit({"n": 1})
    assert sender.close(timeout=10)
    assert sender.stats.failed == 1


def test_full_queue_drops_instead_of_blocking(endpoint: ScriptedEndpoint) -> None:
    endpoint.release.clear()  # the first POST hangs, so the queue fills up behind it
    sender = EventSender(endpoint.url, queue_size=2)
    accepted = [sender.submit({"n": n}) for n in range(5)]
    assert accepted.count(False) >= 2
    assert sender.stats.dropped == accepted.count(False)
    endpoint.release.set()
    assert sender.close(timeout=10)
    assert sender.stats.sent == accepted.count(True)


def test_close_gives_up_after_its_timeout(endpoint: ScriptedEndpoint) -> None:
    endpoint.release.clear()
    sender = EventSender(endpoint.url)
    sender.submit({"n": 1})
    sender.submit({"n": 2})
    assert not sender.close(timeout=0.2)
    assert not sender.submit({"n": 3})  # closed: nothing more is accepted
    # Let the thread finish before the endpoint goes away (no stray warning after the test).
    endpoint.release.set()
    assert sender.flush(timeout=10)
