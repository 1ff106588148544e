"""EventSender through the openlineage-python client's http transport, against a real
HTTP server on loopback: the event as we built it, retries, auth, bounds, draining."""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.serde import Serde

from spark_emitter.config import ConfigurationError
from spark_emitter.delivery import EventSender, client_event, open_client

PRODUCER = "https://github.com/lineage-proxy/lineage-proxy/tree/0.1.0/spark_emitter"
FACETS = "https://openlineage.io/spec/facets"


def _facet(name: str, version: str, **fields: Any) -> dict[str, Any]:
    schema = f"{FACETS}/{version}/{name}.json#/$defs/{name}"
    return {"_producer": PRODUCER, "_schemaURL": schema, **fields}


def lineage_event(n: int = 0, event_type: str = "COMPLETE") -> dict[str, Any]:
    """An event shaped like the emitter's: parent and root, datasets with facets."""
    ref = {"run": {"runId": str(uuid.uuid4())}, "job": {"namespace": "etl", "name": "app"}}
    return {
        "eventType": event_type,
        "eventTime": "2026-11-23T18:00:00.123Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {
            "runId": str(uuid.uuid4()),
            "facets": {"parent": _facet("ParentRunFacet", "1-2-0", **ref, root=ref)},
        },
        "job": {
            "namespace": "etl",
            "name": f"app.write_{n}",
            "facets": {
                "jobType": _facet(
                    "JobTypeJobFacet",
                    "2-0-3",
                    processingType="BATCH",
                    integration="SPARK",
                    jobType="SQL_JOB",
                )
            },
        },
        "inputs": [
            {
                "namespace": "file",
                "name": "/data/in",
                "facets": {"schema": _facet("SchemaDatasetFacet", "1-2-0", fields=[])},
                "inputFacets": {},
            }
        ],
        "outputs": [
            {
                "namespace": "file",
                "name": "/data/out",
                "facets": {},
                "outputFacets": {
                    "outputStatistics": _facet(
                        "OutputStatisticsOutputDatasetFacet", "1-0-2", rowCount=3, size=10
                    )
                },
            }
        ],
    }


def http_sender(url: str, queue_size: int = 10_000, **settings: Any) -> EventSender:
    """A sender through the client's http transport, retrying quickly."""
    transport = {"type": "http", "url": url, "retry": {"backoff_factor": 0.01}, **settings}
    client = open_client(transport)
    assert client is not None
    return EventSender(client, queue_size=queue_size)


class ScriptedEndpoint:
    """Answers each POST with the next status of ``script`` (then 200), recording requests."""

    def __init__(self, port: int = 0) -> None:
        self.script: list[int] = []
        self.received: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.release = threading.Event()
        self.release.set()
        # Requests waiting for ``release`` now: a test can hold one that is under way.
        self.held = 0
        held = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                with held:
                    endpoint.held += 1
                endpoint.release.wait(10)
                with held:
                    endpoint.held -= 1
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.received.append((self.path, dict(self.headers), body))
                status = endpoint.script.pop(0) if endpoint.script else 200
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        # A short poll interval: shutdown() waits for the serving loop's next poll, 0.5 s
        # by default, which would be most of these tests' time.
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        ).start()

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[ScriptedEndpoint]:
    running = ScriptedEndpoint()
    yield running
    running.stop()


def test_the_client_writes_our_event_as_we_built_it() -> None:
    event = lineage_event(event_type="RUNNING")
    assert json.loads(Serde.to_json(client_event(event))) == event


def test_what_our_event_leaves_out_the_client_does_not_add() -> None:
    event = lineage_event(event_type="START")
    del event["inputs"], event["job"]["facets"]
    del event["outputs"][0]["facets"], event["outputs"][0]["outputFacets"]
    assert json.loads(Serde.to_json(client_event(event))) == event


def test_posts_our_event_to_the_lineage_path_under_a_prefixed_url_with_bearer_key(
    endpoint: ScriptedEndpoint,
) -> None:
    sender = http_sender(endpoint.url + "/proxy/", auth={"type": "api_key", "apiKey": "s3cret"})
    event = lineage_event()
    sender.submit(event)
    assert sender.close(timeout=10)
    path, headers, body = endpoint.received[0]
    assert path == "/proxy/api/v1/lineage"
    assert headers["Authorization"] == "Bearer s3cret"
    assert headers["Content-Type"] == "application/json"
    # The client adds its version as a run tag (its emit does that for every event).
    tags = body["run"]["facets"].pop("tags")["tags"]
    assert [tag["key"] for tag in tags] == ["openlineage_client_version"]
    assert body == event
    assert (sender.stats.sent, sender.stats.failed) == (1, 0)


def test_retries_5xx_until_accepted(endpoint: ScriptedEndpoint) -> None:
    endpoint.script = [503, 500, 502]
    sender = http_sender(endpoint.url)
    sender.submit(lineage_event())
    assert sender.close(timeout=10)
    assert len(endpoint.received) == 4
    assert (sender.stats.sent, sender.stats.failed) == (1, 0)


def test_does_not_retry_a_rejected_event(endpoint: ScriptedEndpoint) -> None:
    endpoint.script = [400]
    sender = http_sender(endpoint.url)
    sender.submit(lineage_event(1))
    sender.submit(lineage_event(2))
    assert sender.close(timeout=10)
    assert [body["job"]["name"] for _, _, body in endpoint.received] == [
        "app.write_1",
        "app.write_2",
    ]
    assert (sender.stats.sent, sender.stats.failed) == (1, 1)


def test_gives_up_after_the_retry_budget(endpoint: ScriptedEndpoint) -> None:
    endpoint.script = [503] * 10
    sender = http_sender(endpoint.url, retry={"total": 2, "backoff_factor": 0.01})
    sender.submit(lineage_event())
    assert sender.close(timeout=10)
    assert len(endpoint.received) == 3
    assert sender.stats.failed == 1


def test_unreachable_endpoint_counts_a_failure_and_never_raises() -> None:
    sender = http_sender("http://127.0.0.1:9", retry={"total": 1, "backoff_factor": 0.01})
    assert sender.submit(lineage_event())
    assert sender.close(timeout=10)
    assert sender.stats.failed == 1


def test_full_queue_drops_instead_of_blocking(endpoint: ScriptedEndpoint) -> None:
    endpoint.release.clear()  # the first POST hangs, so the queue fills up behind it
    sender = http_sender(endpoint.url, queue_size=2)
    accepted = [sender.submit(lineage_event(n)) for n in range(5)]
    assert accepted.count(False) >= 2
    assert sender.stats.dropped == accepted.count(False)
    endpoint.release.set()
    assert sender.close(timeout=10)
    assert sender.stats.sent == accepted.count(True)


def test_close_gives_up_after_its_timeout(endpoint: ScriptedEndpoint) -> None:
    endpoint.release.clear()
    sender = http_sender(endpoint.url)
    sender.submit(lineage_event(1))
    sender.submit(lineage_event(2))
    assert not sender.close(timeout=0.2)
    assert not sender.submit(lineage_event(3))  # closed: nothing more is accepted
    # Let the thread finish before the endpoint goes away (no stray warning after the test).
    endpoint.release.set()
    assert sender.flush(timeout=10)


def test_a_transport_the_client_refuses_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"spark\.openlineage\.transport: .*url"):
        open_client({"type": "http", "url": "not a url"})


def test_with_nothing_configured_the_client_is_not_opened(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in [n for n in os.environ if n.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no openlineage.yml here
    monkeypatch.setenv("HOME", str(tmp_path))
    assert open_client(None) is None


def test_the_clients_own_configuration_file_is_used_when_spark_conf_has_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    location = tmp_path / "events.jsonl"
    config = tmp_path / "openlineage.yml"
    config.write_text(f"transport:\n  type: file\n  log_file_path: {location}\n  append: true\n")
    for name in [n for n in os.environ if n.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(config))
    client = open_client(None)
    assert client is not None
    sender = EventSender(client)
    events = [lineage_event(n) for n in range(3)]
    for event in events:
        sender.submit(event)
    assert sender.close(timeout=10)
    written = [json.loads(line) for line in location.read_text().splitlines()]
    assert [e["run"]["runId"] for e in written] == [e["run"]["runId"] for e in events]
