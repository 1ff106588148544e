"""The object-store archive read where it lies: ``replay --archive s3://bucket/prefix``
(the function, and the command into a real Kafka topic)
and ``lineage-proxy spark compact|graph --archive s3a://bucket/prefix`` (PySpark local
mode, hadoop-aws from the Maven cache) against a real S3-compatible server (S3Proxy);
events written by the object_archive writer (plain and gzip objects, two days, two
namespaces)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator

import orjson
import pytest
import yaml

from consumers.replay import ReplayFilter, parse_time, replay
from proxy.config.settings import ProxyConfig
from proxy.destinations.object_archive.config import ObjectArchiveDestinationConfig
from proxy.destinations.object_archive.destination import ObjectArchiveWriter
from tests.support.cli import run_cli
from tests.support.doubles.marquez_double import MarquezDouble
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.paths import REPO
from tests.support.s3_server import (
    ACCESS_KEY,
    BUCKET,
    SECRET_KEY,
    S3Server,
    object_archive_target,
    s3_credentials,
)
from tests.support.sample_events import run_event
from tests.support.tiers import starts

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("s3")]

# (namespace, eventTime) in archive order: not time order, across two days.
ARCHIVED = [
    ("team-a", "2026-11-21T10:00:05Z"),
    ("team-b", "2026-11-20T23:59:59Z"),
    ("team-a", "2026-11-21T09:00:00+01:00"),  # 08:00Z: before the first one
    ("team-a", "2026-11-20T12:00:00Z"),
    ("team-b", "2026-11-21T10:00:00Z"),
]


@pytest.fixture(scope="module")
@starts("S3Proxy (a JVM)")
def s3(tmp_path_factory) -> Iterator[S3Server]:
    server = S3Server(tmp_path_factory.mktemp("s3")).start()
    server.client().create_bucket(Bucket=BUCKET)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def credentials(monkeypatch) -> None:
    for name, value in s3_credentials().items():
        monkeypatch.setenv(name, value)


async def _archive(s3: S3Server, prefix: str) -> list[dict]:
    events = []
    runs: dict[str, str] = {}  # one run per namespace: one key, one partition
    for namespace, when in ARCHIVED:
        run_id = runs.setdefault(namespace, str(uuid.uuid4()))
        event = run_event(namespace=namespace, name="nightly", run_id=run_id)
        event["eventTime"] = when
        events.append(event)
    writers = [
        ObjectArchiveWriter(
            ObjectArchiveDestinationConfig.model_validate(
                object_archive_target(s3, prefix, gzip=gzip)
            )
        )
        for gzip in (False, True)
    ]
    for writer in writers:
        await writer.start()
    for i, event in enumerate(events):
        [error] = await writers[i % 2].write_many([(event, orjson.dumps(event))])
        assert error is None
    for writer in writers:
        await writer.close()
    return events


def _consumers(s3: S3Server, prefix: str, marquez_url: str) -> ProxyConfig:
    return ProxyConfig.model_validate(
        {
            "consumers": {
                # The writer's settings tell replay how to reach the bucket.
                "archive": {"target": object_archive_target(s3, prefix)},
                "backfill": {
                    "target": {
                        "kind": "marquez",
                        "url": marquez_url,
                        "retry": {"initial_backoff_seconds": 0.01},
                    }
                },
            }
        }
    )


@pytest.mark.parametrize("scheme", ["s3", "s3a"])
async def test_replay_reads_the_bucket_in_event_time_order(s3, credentials, scheme):
    prefix = f"replay-{scheme}"
    archived = await _archive(s3, prefix)
    async with MarquezDouble() as marquez:
        config = _consumers(s3, prefix, marquez.url)
        result = await replay(
            config.consumers,
            config.kafka,
            f"{scheme}://{BUCKET}/{prefix}",
            "backfill",
            ReplayFilter(),
            progress_stream=None,
        )
    times = [parse_time(e["eventTime"]) for e in marquez.events]
    assert result.sent == len(archived) and result.failed == 0
    assert times == sorted(parse_time(e["eventTime"]) for e in archived)
    assert sorted(orjson.dumps(e) for e in marquez.events) == sorted(
        orjson.dumps(e) for e in archived
    )


async def test_replay_command_sends_one_namespace_from_the_bucket_to_a_topic(
    s3, credentials, broker, topic, tmp_path
):
    """``lineage-proxy replay --archive s3://… --namespace … --to-topic …`` as a user runs
    it: the bucket reached with the settings of the configured object_archive consumer,
    the kept events in Kafka (read back independently), in event-time order."""
    prefix = "replay-filter"
    archived = await _archive(s3, prefix)
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "kafka": {"bootstrap_servers": broker.bootstrap_servers},
                "consumers": {"archive": {"target": object_archive_target(s3, prefix)}},
            }
        )
    )
    code, _, err = await run_cli(
        "replay", "--archive", f"s3://{BUCKET}/{prefix}", "--namespace", "team-b",
        "--to-topic", topic, "--create-topic", "--config", str(config),
    )  # fmt: skip
    assert code == 0, err
    kept = [e for e in archived if e["job"]["namespace"] == "team-b"]
    landed = [
        orjson.loads(r.value)
        for r in await asyncio.to_thread(read_all_produced_so_far, broker.bootstrap_servers, topic)
    ]
    assert sorted(orjson.dumps(e) for e in landed) == sorted(orjson.dumps(e) for e in kept)
    assert [parse_time(e["eventTime"]) for e in landed] == sorted(
        parse_time(e["eventTime"]) for e in kept
    ), "one run, one key, one partition: in event-time order"


# Both jobs in one process, as ``lineage-proxy spark compact`` then ``... graph`` would
# run them: one JVM with hadoop-aws to start instead of two (most of this test's minutes).
_BOTH_JOBS = """
import json, sys
from proxy.cli.main import main
sys.exit(max(main(argv) for argv in json.loads(sys.argv[1])))
"""


def _spark_cli(s3: S3Server, *commands: list[str]) -> subprocess.CompletedProcess[str]:
    """``lineage-proxy spark …`` for each of ``commands``, in one process: its session
    loads hadoop-aws from the cache and reaches the store through the AWS_* variables."""
    environment = {
        **os.environ,
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
    }
    argvs = [["spark", *argv, "--master", "local[2]"] for argv in commands]
    return subprocess.run(
        [sys.executable, "-c", _BOTH_JOBS, orjson.dumps(argvs).decode()],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(1200)  # two Spark jobs with hadoop-aws; minutes on a loaded machine
async def test_spark_compact_and_graph_read_the_bucket_with_s3a(s3, credentials, tmp_path):
    """The archive is read from the bucket by S3A; the outputs go to local directories
    (writing Spark output to S3Proxy through S3A fails: see docs/consumers/object-storage.md)."""
    jars = await asyncio.to_thread(
        subprocess.run,
        [str(REPO / "scripts" / "s3.sh"), "hadoop-aws-jars"],
        capture_output=True,
        check=False,
    )
    assert jars.returncode == 0, jars.stderr
    prefix = "spark"
    archived = await _archive(s3, prefix)
    archive = f"s3a://{BUCKET}/{prefix}"
    jobs = await asyncio.to_thread(
        _spark_cli,
        s3,
        ["compact", "--archive", archive, "--out", str(tmp_path / "compacted")],
        ["graph", "--archive", archive, "--out", str(tmp_path / "graph")],
    )
    assert jobs.returncode == 0, jobs.stderr[-3000:]
    assert f"{len(archived)} event(s) read, {len(archived)} added" in jobs.stdout
    written = [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.parquet")]
    assert any(re.search(r"dt=2026-11-20/namespace=team-b/", p) for p in written), written
    assert any(p.startswith("graph/") for p in written), written
    assert "runs: " in jobs.stdout, jobs.stdout
