"""Routing rules in the real proxy: one rules file fanning real events out to two Kafka
topics, the archive and an HTTP receiver at once; the rejected route; required and
best-effort HTTP; each destination checked for exactly what it received."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession

from proxy.destinations.archive.destination import finished_files
from routing_rules.transforms import REDACTED
from tests.support.doubles.target_double import TargetDouble
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.sample_events import dataset_event, job_event, rich_run_event, run_event
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def write_rules(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def archived(directory: Path) -> list[tuple[str, dict[str, Any]]]:
    """(partition, event) for every line of every finished archive file."""
    return [
        (f"{f.parent.parent.name}/{f.parent.name}", orjson.loads(line))
        for f in finished_files(directory)
        for line in f.read_bytes().splitlines()
    ]


async def post(session: ClientSession, url: str, body: Any) -> tuple[int, Any]:
    async with session.post(f"{url}/api/v1/lineage", data=orjson.dumps(body)) as resp:
        return resp.status, await resp.json()


async def test_one_rules_file_fans_out_to_two_topics_the_archive_and_http(
    start_proxy, broker, tmp_path: Path
):
    topic_a, topic_other = f"team-a.{uuid.uuid4().hex[:8]}", f"other.{uuid.uuid4().hex[:8]}"
    async with TargetDouble() as receiver:
        rules = write_rules(
            tmp_path / "rules.yaml",
            f"""
version: 1
destinations:
  team-a:
    kind: kafka
    topic: {topic_a}
    key: job
    headers: {{team: a}}
    producer: {{linger.ms: 1}}   # its own producer
  other: {{kind: kafka, topic: {topic_other}, key: "{{job.namespace}}"}}
  archive: {{kind: archive, directory: all}}
  receiver:
    kind: http
    target: {{kind: http, url: "{receiver.url}/api/v1/lineage", timeout_seconds: 5}}
  invalid: {{kind: archive, directory: rejected}}
rules:
  - name: redact-sql
    match: {{has_facets: [job.sql]}}
    transform: [{{redact: [job.facets.sql.query]}}]
    continue: true
  - name: team-a
    match: {{job_namespace: team-a}}
    to: [team-a, archive, receiver]
  - name: no-running
    match: {{event_type: RUNNING}}
    drop: true
default:
  to: [other, archive]
rejected:
  to: [invalid]
""",
        )
        team_a = rich_run_event(namespace="team-a", name="etl.daily")
        team_b = run_event(namespace="team-b", name="load")
        running = run_event(namespace="team-b", event_type="RUNNING")
        dataset = dataset_event(namespace="s3://bucket", name="path/x")
        job = job_event(namespace="team-c", name="def")
        bad = run_event()
        bad["run"]["runId"] = "not-a-uuid"

        async with (
            start_proxy(routing={"rules": rules, "archive_root": tmp_path}) as url,
            ClientSession() as session,
        ):
            for event in (team_a, team_b, running, dataset, job):
                assert await post(session, url, event) == (200, {"status": "success"})
            status, body = await post(session, url, bad)
            assert status == 400 and body["details"][0]["pointer"] == "/run/runId"
            await wait_for(lambda: len(receiver.events) == 1)
            metrics = await (await session.get(f"{url}/metrics")).text()

    redacted = orjson.loads(orjson.dumps(team_a))
    redacted["job"]["facets"]["sql"]["query"] = REDACTED

    (record,) = read_all_produced_so_far(broker.bootstrap_servers, topic_a)
    assert orjson.loads(record.value) == redacted
    assert record.key == "job:team-a/etl.daily"
    assert record.headers["team"] == b"a" and record.headers["ol_namespace"] == b"team-a"

    others = read_all_produced_so_far(broker.bootstrap_servers, topic_other)
    assert sorted((r.key, orjson.loads(r.value)["eventTime"]) for r in others) == sorted(
        [("team-b", team_b["eventTime"]), ("", dataset["eventTime"]), ("team-c", job["eventTime"])]
    )
    assert {r.value for r in others} == {orjson.dumps(e) for e in (team_b, dataset, job)}

    assert receiver.events == [redacted]

    stored = archived(tmp_path / "all")
    assert sorted(orjson.dumps(e) for _, e in stored) == sorted(
        orjson.dumps(e) for e in (redacted, team_b, dataset, job)
    )
    partitions = {p for p, _ in stored}
    day = team_a["eventTime"][:10]
    assert partitions == {
        f"dt={day}/namespace=team-a",
        f"dt={day}/namespace=team-b",
        f"dt={dataset['eventTime'][:10]}/namespace=s3%3A%2F%2Fbucket",
        f"dt={day}/namespace=team-c",
    }

    (rejected,) = [e for _, e in archived(tmp_path / "rejected")]
    assert rejected["event"] == bad
    assert rejected["rejection"]["status"] == 400
    assert rejected["rejection"]["details"][0]["pointer"] == "/run/runId"

    assert 'lineage_proxy_routed_events_total{outcome="dropped",rule="no-running"} 1.0' in metrics
    assert 'lineage_proxy_routed_events_total{outcome="matched",rule="(default)"} 3.0' in metrics
    assert 'lineage_proxy_routed_events_total{outcome="matched",rule="redact-sql"} 1.0' in metrics


def kafka_and_http_rules(directory: Path, receiver: TargetDouble, *, required: bool) -> Path:
    """Every event to Kafka and to ``receiver`` (generic HTTP, no retries)."""
    return write_rules(
        directory / "rules.yaml",
        f"""
version: 1
destinations:
  kafka: {{kind: kafka}}
  receiver:
    kind: http
    required: {str(required).lower()}
    target:
      kind: http
      url: "{receiver.url}/api/v1/lineage"
      retry: {{max_attempts: 1}}
default: {{to: [kafka, receiver]}}
""",
    )


async def test_best_effort_http_failure_does_not_fail_the_client(
    start_proxy, broker, topic, tmp_path
):
    async with TargetDouble() as receiver:
        await receiver.down()
        rules = kafka_and_http_rules(tmp_path, receiver, required=False)
        event = run_event()
        async with (
            start_proxy(routing={"rules": rules}) as url,
            ClientSession() as session,
        ):
            assert (await post(session, url, event))[0] == 200
            failures = (
                'lineage_proxy_delivery_failures_total{destination="receiver",retriable="True"} 1.0'
            )

            async def failure_counted() -> bool:
                return failures in await (await session.get(f"{url}/metrics")).text()

            await wait_for(failure_counted, what="the failed delivery counted")
    (record,) = read_all_produced_so_far(broker.bootstrap_servers, topic)
    assert orjson.loads(record.value) == event


async def test_required_http_failure_answers_retry_and_success_waits_for_it(start_proxy, tmp_path):
    async with TargetDouble() as receiver:
        rules = kafka_and_http_rules(tmp_path, receiver, required=True)
        async with (
            start_proxy(routing={"rules": rules}) as url,
            ClientSession() as session,
        ):
            ok = run_event()
            assert (await post(session, url, ok))[0] == 200
            assert receiver.events == [ok]  # already there when the client got its 200
            receiver.fail_next(1, status=503)
            status, body = await post(session, url, run_event())
            assert status == 503 and "receiver" in body["error"]
