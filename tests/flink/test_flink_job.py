"""A real Flink streaming job sends its lineage through the proxy, configured only as
docs/clients/flink.md says (the job and its one run: tests/flink/conftest.py).

Every request the job made was answered 2xx and landed in Kafka in order; its two Kafka
topics, given by bootstrap list and by hostname, are datasets of one namespace (the page's
alignment rule); the archive keeps one RUNNING event of the run; the status page shows it.
"""

from __future__ import annotations

import pytest

from proxy.validation.validator import EventValidator
from tests.flink.conftest import LINES, Streaming, event_types
from tests.support.metrics import total

pytestmark = [pytest.mark.timeout(900)]


def test_the_job_really_streams_its_input_to_its_output(streaming: Streaming) -> None:
    assert streaming.output_lines == [line.upper().encode() for line in LINES]


def test_every_event_was_accepted_and_lands_in_kafka_in_order(streaming: Streaming) -> None:
    events = [event for _, event in streaming.kafka]
    types = event_types(streaming.kafka)
    # One run: START, the checkpoint tracker's RUNNING events, ABORT for the cancel.
    assert types.count("START") == 1 and types.count("RUNNING") >= 3, types
    assert types[-1] == "ABORT" and set(types) == {"START", "RUNNING", "ABORT"}, types
    [run_id] = {event["run"]["runId"] for event in events}
    assert {key for key, _ in streaming.kafka} == {f"run:{run_id}"}
    # Each sender's events in the order it sent them: the JobManager's tracker one RUNNING
    # per new checkpoint count, then its ABORT. (The client's START and the tracker's
    # first RUNNING race each other: a second's tracking interval, on a busy machine, let
    # RUNNING land first once in four runs.)
    tracker = [e for e in events if e["eventType"] != "START"]
    checkpoints = [e["run"]["facets"]["checkpoints"]["total"] for e in tracker[:-1]]
    assert checkpoints == sorted(set(checkpoints)), checkpoints
    times = [e["eventTime"] for e in tracker]
    assert times == sorted(times)
    assert {(e["job"]["namespace"], e["producer"].split("/")[-1]) for e in events} == {
        ("streaming", "flink")
    }
    # Every request the job made was answered 2xx, and each one's event is in Kafka once.
    metrics = streaming.metrics_at_end
    requests = total(metrics, "lineage_proxy_http_requests_total", endpoint="lineage")
    answered_2xx = sum(
        total(metrics, "lineage_proxy_http_requests_total", endpoint="lineage", status=str(code))
        or 0
        for code in (200, 201, 202, 204)
    )
    assert requests == answered_2xx == len(events), (requests, answered_2xx, len(events))
    validator = EventValidator()
    assert [validator.validate(event) for event in events] == [[]] * len(events)


def test_both_topics_are_datasets_of_one_kafka_namespace(streaming: Streaming) -> None:
    [start] = [event for _, event in streaming.kafka if event["eventType"] == "START"]
    inputs = [(d["namespace"], d["name"]) for d in start["inputs"]]
    outputs = [(d["namespace"], d["name"]) for d in start["outputs"]]
    # Read by the bootstrap list, written by hostname with another broker first: one name.
    assert inputs == [(streaming.canonical, streaming.source_topic)]
    assert outputs == [(streaming.canonical, streaming.sink_topic)]
    # The SQL tables Flink names after them too, in the topics' namespace.
    tables = [
        (symlink["namespace"], symlink["name"].rsplit(".", 1)[-1])
        for dataset in start["inputs"] + start["outputs"]
        for symlink in dataset["facets"]["symlinks"]["identifiers"]
    ]
    assert tables == [(streaming.canonical, "source_topic"), (streaming.canonical, "sink_topic")]


def test_the_archive_keeps_one_running_event_per_run_while_kafka_has_them_all(
    streaming: Streaming,
) -> None:
    archived = sorted(event["eventType"] for event in streaming.archived)
    assert archived == ["ABORT", "RUNNING", "START"]
    kafka_running = event_types(streaming.kafka).count("RUNNING")
    throttled = total(
        streaming.metrics_at_end,
        "lineage_proxy_routed_events_total",
        rule="streaming-running",
        outcome="throttled",
    )
    assert throttled == kafka_running - 1


def test_the_status_page_shows_the_streaming_run(streaming: Streaming) -> None:
    status = streaming.status_while_running
    rules = {rule["name"]: rule for rule in status["rules"]}
    # Read once START and three RUNNING events had landed: counted by then, at least.
    assert rules["streaming-running"]["matched"] >= 4
    assert rules["streaming-running"]["throttled"] >= 2
    assert status["events"]["accepted"]["total"] >= 4
    assert status["events"]["accepted"]["per_minute"] > 0
    assert status["events"]["rejected"]["total"] == 0
