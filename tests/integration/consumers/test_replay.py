"""``replay``: archived events re-sent in event-time order, filtered, to a target or a topic."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
import uuid

import orjson
import pytest
import yaml
from confluent_kafka.admin import AdminClient, NewTopic

from consumers.config import ConsumerConfig
from consumers.replay import ReplayFilter, parse_time, replay
from proxy.config.settings import KafkaConfig, ProxyConfig
from proxy.destinations.archive.destination import ArchiveWriter
from tests.support.doubles.marquez_double import MarquezDouble
from tests.support.kafka_reader import read_topic
from tests.support.paths import REPO
from tests.support.sample_events import run_event

pytestmark = pytest.mark.integration

# (namespace, eventTime) in the order they were archived: deliberately not time order,
# across two days and two namespaces.
ARCHIVED = [
    ("team-a", "2026-11-21T10:00:05Z"),
    ("team-b", "2026-11-20T23:59:59Z"),
    ("team-a", "2026-11-21T09:00:00+01:00"),  # 08:00Z: before the first one
    ("team-a", "2026-11-20T12:00:00Z"),
    ("team-b", "2026-11-21T10:00:00Z"),
    ("team-a", "2026-11-22T00:00:00Z"),
]


# One run per namespace: a run's events share a key, so replay's per-key order shows.
RUN_IDS = {"team-a": str(uuid.uuid4()), "team-b": str(uuid.uuid4())}


def _event(namespace: str, when: str) -> dict:
    event = run_event(namespace=namespace, name="nightly", run_id=RUN_IDS[namespace])
    event["eventTime"] = when
    return event


async def _archive(directory) -> list[dict]:
    events = [_event(ns, t) for ns, t in ARCHIVED]
    # Two writers, one gzip: replay reads both kinds of file.
    plain, zipped = ArchiveWriter(directory), ArchiveWriter(directory, gzip=True)
    await plain.start()
    await zipped.start()
    for i, event in enumerate(events):
        await (zipped if i % 2 else plain).write(event, orjson.dumps(event))
    await plain.close()
    await zipped.close()
    return events


def _sections(
    marquez_url: str, bootstrap: str = "embedded"
) -> tuple[dict[str, ConsumerConfig], KafkaConfig]:
    config = ProxyConfig.model_validate(
        {
            "kafka": {"bootstrap_servers": bootstrap},
            "consumers": {
                "backfill": {
                    "target": {
                        "kind": "marquez",
                        "url": marquez_url,
                        "retry": {"initial_backoff_seconds": 0.01},
                    }
                }
            },
        }
    )
    return config.consumers, config.kafka


def _times(events):
    return [parse_time(e["eventTime"]) for e in events]


async def test_replay_filters_by_time_window_and_namespace(tmp_path):
    await _archive(tmp_path)
    keep = ReplayFilter(
        since=parse_time("2026-11-20T13:00:00Z"), until=parse_time("2026-11-22"), namespace="team-a"
    )
    async with MarquezDouble() as marquez:
        result = await replay(*_sections(marquez.url), tmp_path, "backfill", keep)
    assert [e["eventTime"] for e in marquez.events] == [
        "2026-11-21T09:00:00+01:00",
        "2026-11-21T10:00:05Z",
    ]
    assert result.sent == 2


async def test_events_the_target_refuses_are_counted_and_the_rest_still_sent(tmp_path):
    bad = _event("team-a", "2026-11-21T00:00:00Z")
    del bad["job"]["name"]  # Marquez: 422
    good = _event("team-a", "2026-11-21T00:00:01Z")
    writer = ArchiveWriter(tmp_path)
    await writer.start()
    for event in (bad, good):
        await writer.write(event, orjson.dumps(event))
    await writer.close()
    async with MarquezDouble() as marquez:
        result = await replay(*_sections(marquez.url), tmp_path, "backfill", ReplayFilter())
    assert (result.sent, result.failed) == (1, 1)
    assert marquez.events == [good]


async def _replay_cli(tmp_path, bootstrap: str, *to: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "config.yaml"
    consumers = {"backfill": {"target": {"kind": "marquez", "url": "http://127.0.0.1:1"}}}
    config.write_text(
        yaml.safe_dump({"kafka": {"bootstrap_servers": bootstrap}, "consumers": consumers})
    )
    argv = ["replay", "--archive", str(tmp_path / "archive"), *to, "--config", str(config)]
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "proxy", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _topics(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


async def test_replay_cli_to_a_topic_keys_events_and_exits_0(broker, topic, tmp_path):
    archived = await _archive(tmp_path / "archive")
    process = await _replay_cli(
        tmp_path, broker.bootstrap_servers, "--to-topic", topic, "--create-topic"
    )
    assert process.returncode == 0, process.stderr
    assert f"replayed {len(archived)} events to {topic}" in process.stderr
    records = await asyncio.to_thread(
        read_topic, broker.bootstrap_servers, topic, expect=len(archived)
    )
    assert len(records) == len(archived)
    keys = {f"run:{run_id}" for run_id in RUN_IDS.values()}
    assert {r.key for r in records} == keys
    for key in keys:
        times = _times(orjson.loads(r.value) for r in records if r.key == key)
        assert times == sorted(times)  # one key, one partition: event-time order


async def test_replay_cli_to_a_mistyped_consumer_exits_2_naming_the_configured_ones(
    broker, tmp_path
):
    await _archive(tmp_path / "archive")
    process = await _replay_cli(tmp_path, broker.bootstrap_servers, "--to-consumer", "backfil")
    assert process.returncode == 2
    assert process.stderr.strip().splitlines() == [
        "lineage-proxy replay: --to-consumer backfil: no such consumer (configured: backfill)"
    ]


async def test_replay_cli_to_a_missing_topic_exits_2_and_creates_nothing(broker, topic, tmp_path):
    await _archive(tmp_path / "archive")
    process = await _replay_cli(tmp_path, broker.bootstrap_servers, "--to-topic", topic)
    assert process.returncode == 2
    [line] = process.stderr.strip().splitlines()
    assert f"--to-topic {topic}: no such topic" in line and "--create-topic" in line
    assert topic not in await asyncio.to_thread(_topics, broker.bootstrap_servers)


async def test_replay_cli_to_an_existing_topic_needs_no_create_topic(broker, topic, tmp_path):
    archived = await _archive(tmp_path / "archive")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    await asyncio.to_thread(admin.create_topics([NewTopic(topic, 1, -1)])[topic].result, 10)
    process = await _replay_cli(tmp_path, broker.bootstrap_servers, "--to-topic", topic)
    assert process.returncode == 0, process.stderr
    records = await asyncio.to_thread(
        read_topic, broker.bootstrap_servers, topic, expect=len(archived)
    )
    assert len(records) == len(archived)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_progress_overwrites_one_line_on_a_terminal(tmp_path):
    await _archive(tmp_path)
    terminal = _Terminal()
    async with MarquezDouble() as marquez:
        await replay(*_sections(marquez.url), tmp_path, "backfill", ReplayFilter(), terminal)
    assert f"\rreplay: 2026-11-22  sent {len(ARCHIVED)}" in terminal.getvalue()


async def test_progress_without_a_terminal_is_a_line_every_period_with_rate_and_eta(tmp_path):
    await _archive(tmp_path)
    quiet, every_time = io.StringIO(), io.StringIO()
    async with MarquezDouble() as marquez:
        for stream, every in ((quiet, 3600.0), (every_time, 0.0)):
            await replay(
                *_sections(marquez.url),
                tmp_path,
                "backfill",
                ReplayFilter(),
                stream,
                progress_every=every,
            )
    assert quiet.getvalue() == ""
    lines = every_time.getvalue().splitlines()
    assert len(lines) >= len(ARCHIVED) and "\r" not in every_time.getvalue()
    assert lines[0].startswith("replay: 2026-11-20  sent 1  failed 0  ")
    assert "/s  ETA " in lines[0]
    assert lines[-1].startswith(f"replay: 2026-11-22  sent {len(ARCHIVED)}  failed 0")
    assert "ETA" not in lines[-1]  # done: nothing left to estimate


async def _archive_with_files_in_progress(
    directory,
) -> tuple[list[dict], ArchiveWriter, ArchiveWriter]:
    """One finished file, and a plain and a gzip writer still writing (their files are
    ``_*.inprogress``), one with a line being written (no newline yet)."""
    finished = _event("team-a", "2026-11-21T10:00:00Z")
    done = ArchiveWriter(directory)
    await done.start()
    await done.write(finished, orjson.dumps(finished))
    await done.close()
    plain, zipped = ArchiveWriter(directory), ArchiveWriter(directory, gzip=True)
    await plain.start()
    await zipped.start()
    latest = [_event("team-a", f"2026-11-21T10:0{i}:30Z") for i in range(6)]
    for i, event in enumerate(latest):
        await (zipped if i % 2 else plain).write(event, orjson.dumps(event))
    [growing] = [
        p for p in directory.rglob("_*.inprogress") if not p.name.endswith(".gz.inprogress")
    ]
    with growing.open("ab") as handle:
        handle.write(b'{"eventTime": "2026-11-21T10:09:00Z", "produ')
    return [finished, *latest], plain, zipped


async def test_replay_includes_files_still_being_written_up_to_their_last_whole_line(tmp_path):
    events, plain, zipped = await _archive_with_files_in_progress(tmp_path)
    try:
        async with MarquezDouble() as marquez:
            result = await replay(*_sections(marquez.url), tmp_path, "backfill", ReplayFilter())
    finally:
        await plain.close()
        await zipped.close()
    assert sorted(e["run"]["runId"] for e in marquez.events) == sorted(
        e["run"]["runId"] for e in events
    )
    assert (result.sent, result.unreadable, result.in_progress_files) == (7, 0, 2)


async def test_replay_cli_says_how_many_files_were_still_being_written(broker, topic, tmp_path):
    events, plain, zipped = await _archive_with_files_in_progress(tmp_path / "archive")
    try:
        process = await _replay_cli(
            tmp_path, broker.bootstrap_servers, "--to-topic", topic, "--create-topic"
        )
    finally:
        await plain.close()
        await zipped.close()
    assert process.returncode == 0, process.stderr
    assert f"replayed {len(events)} events to {topic}" in process.stderr
    assert "2 of the files read were still being written (_*.inprogress)" in process.stderr
