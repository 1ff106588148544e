"""One run of a real Flink streaming job through the proxy, shared by every test of the
directory: a Flink start costs a JVM and a mini-cluster, so the job runs once per session
(per xdist worker; the directory is one xdist group, tests/conftest.py) and each test reads
what it left.

The job is configured only as docs/clients/flink.md says: its OpenLineage settings are the
page's ``conf/config.yaml`` snippet with only the proxy's URL, token and two intervals
changed (seconds, not a minute: the fixture waits for RUNNING events), and the proxy's rules
are the page's ``rules.yaml`` with the test cluster's broker names in its alignment rule and
an interval no test outlives. The job reads its topic by the cluster's bootstrap list and
writes its output by hostname, so the two topics would be datasets of two namespaces but for
that rule.

The fixture moves the job on by what it saw arrive: running until Kafka holds its START and
three RUNNING events, then cancelled, then ended once its ABORT is in Kafka.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import pytest_asyncio
import yaml
from aiohttp import ClientSession
from confluent_kafka import Producer

from proxy.destinations.archive.layout import finished_files
from proxy.server.serve import listener_tls, serving
from proxy.web.app import create_app
from tests.support.consumers import create_topic
from tests.support.kafka_cluster import KafkaCluster
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.metrics import metrics_of
from tests.support.paths import REPO
from tests.support.ports import free_port
from tests.support.proxies import proxy_config
from tests.support.tiers import require_full, starts
from tests.support.waiting import wait_for

PAGE = REPO / "docs" / "clients" / "flink.md"
EXAMPLE_RULES = REPO / "routing_rules" / "examples" / "kafka-streaming.yaml"
TOKEN = "flink-job-token"
LINES = [f"line {i}" for i in range(5)]
# What the page's snippets say, replaced by the test's own values.
DOCS_URL, DOCS_TOKEN = "http://proxy:5000", "my-token"


def snippet(title: str) -> Any:
    """The page's YAML block titled ``title``, parsed."""
    found = re.findall(rf'```yaml title="{re.escape(title)}"\n(.*?)```', PAGE.read_text(), re.S)
    assert len(found) == 1, f"{PAGE} has {len(found)} blocks titled {title}"
    return yaml.safe_load(found[0])


def flink_settings(proxy_url: str, rest_port: int, jars: list[str]) -> dict[str, str]:
    """The page's Flink configuration for this proxy, as strings (Flink's Configuration
    reads a YAML true as "true"), plus the mini-cluster's own settings: its jars and a
    REST port of this worker's (the checkpoint tracker asks it)."""
    documented = snippet("conf/config.yaml")
    assert documented["openlineage.transport.url"] == DOCS_URL
    assert documented["openlineage.transport.auth.apiKey"] == DOCS_TOKEN
    settings = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in documented.items()}
    settings.update(
        {
            "openlineage.transport.url": proxy_url,
            "openlineage.transport.auth.apiKey": TOKEN,
            "openlineage.trackingIntervalInSeconds": "1",
            "execution.checkpointing.interval": "1s",
            "rest.port": str(rest_port),
            "pipeline.jars": ";".join(Path(jar).as_uri() for jar in jars),
        }
    )
    return settings


def cluster_names(bootstrap: str) -> str:
    """A full-match regex for every way the test's producers name this cluster: any of its
    ports, by address or by hostname, alone or heading a bootstrap list."""
    ports = "|".join(server.rsplit(":", 1)[1] for server in bootstrap.split(","))
    return rf"kafka://(127\.0\.0\.1|localhost):({ports})(,[^,]+)*"


def rules_for(bootstrap: str, archive_root: Path) -> tuple[Path, str]:
    """The page's rules (the same as the shipped example's), with this cluster's names in
    the alignment rule; the file's path and the canonical namespace."""
    rules = snippet("rules.yaml")
    assert rules == yaml.safe_load(EXAMPLE_RULES.read_text()), "page and example differ"
    canonical = "kafka://" + bootstrap.split(",")[0]
    [align] = [r for r in rules["rules"] if r["name"] == "kafka-cluster-names"]
    align["transform"][0]["map_namespaces"]["datasets"] = [
        {"from_regex": cluster_names(bootstrap), "to": canonical}
    ]
    # One RUNNING per run to the archive, whatever the machine's speed: the run is shorter.
    [running] = [r for r in rules["rules"] if r["name"] == "streaming-running"]
    running["throttle"]["interval_seconds"] = 3600
    rules["destinations"]["rejected"]["topic"] = f"test.flink-rejected.{uuid.uuid4().hex[:8]}"
    path = archive_root / "rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    return path, canonical


def _flink(command: str) -> str:
    """``scripts/flink.sh command``'s output: the one place that installs Flink."""
    done = subprocess.run(
        [str(REPO / "scripts" / "flink.sh"), command], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


@pytest.fixture(scope="session")
@starts("PyFlink (a JVM and its mini-cluster)")
def flink() -> tuple[str, list[str]]:
    """The Flink venv's python and the jars, installed on first use."""
    require_full("PyFlink")
    return _flink("python"), _flink("jars").splitlines()


@dataclass
class Streaming:
    """What one run of the job left: every lineage record in Kafka (key, event), the
    archive, the proxy's /metrics and status JSON while the job ran and at the end."""

    kafka: list[tuple[str | None, dict[str, Any]]]
    archived: list[dict[str, Any]]
    status_while_running: dict[str, Any]
    metrics_at_end: str
    output_lines: list[bytes]
    canonical: str
    source_topic: str
    sink_topic: str
    lineage_topic: str  # where the proxy wrote the job's events
    rules: Path  # the proxy's rules, with this cluster's names in the alignment rule


def _lineage(bootstrap: str, topic: str) -> list[tuple[str | None, dict[str, Any]]]:
    return [(r.key, orjson.loads(r.value)) for r in read_all_produced_so_far(bootstrap, topic)]


def event_types(records: list[tuple[str | None, dict[str, Any]]]) -> list[str]:
    return [event["eventType"] for _, event in records]


@pytest_asyncio.fixture(scope="session")
async def streaming(
    broker: KafkaCluster,
    flink: tuple[str, list[str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Streaming]:
    python, jars = flink
    workdir = tmp_path_factory.mktemp("flink")
    bootstrap = broker.bootstrap_servers
    lineage_topic, source, sink = (f"test.flink-{n}.{workdir.name}" for n in ("ol", "in", "out"))
    for topic in (source, sink):
        create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for line in LINES:
        producer.produce(source, line.encode())
    assert producer.flush(30) == 0
    rules, canonical = rules_for(bootstrap, workdir)
    config = proxy_config(
        bootstrap,
        lineage_topic,
        auth={"enabled": True, "tokens": [{"name": "flink", "token": TOKEN}]},
        server={"host": "127.0.0.1", "port": 0},
        routing={"rules": rules, "archive_root": workdir},
    )
    # The output by hostname, another broker first: another name for the same cluster.
    by_hostname = ",".join(f"localhost:{s.rsplit(':', 1)[1]}" for s in bootstrap.split(",")[::-1])
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with serving(create_app(config), listener_tls(config)) as port:
        url = f"http://127.0.0.1:{port}"
        spec = {
            "settings": flink_settings(url, free_port(), jars),
            "source": {"bootstrap": bootstrap, "topic": source},
            "sink": {"bootstrap": by_hostname, "topic": sink},
        }
        log = (workdir / "job.log").open("w")
        job = await asyncio.create_subprocess_exec(
            python,
            str(REPO / "tests" / "flink" / "streaming_job.py"),
            json.dumps(spec),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            cwd=workdir,
        )
        assert job.stdin is not None and job.stdout is not None
        try:

            async def lineage_holds(at_least: dict[str, int]) -> bool:
                landed = event_types(await asyncio.to_thread(_lineage, bootstrap, lineage_topic))
                return all(landed.count(t) >= n for t, n in at_least.items())

            await wait_for(
                lambda: lineage_holds({"START": 1, "RUNNING": 3}),
                within=240,
                what="the job's START and 3 RUNNING events in Kafka (see job.log)",
            )
            async with ClientSession() as session:
                response = await session.get(f"{url}/api/v1/status", headers=headers)
                assert response.status == 200, await response.text()
                status = await response.json()
            job.stdin.write(b"stop\n")
            await job.stdin.drain()
            await wait_for(
                lambda: lineage_holds({"ABORT": 1}), within=120, what="the job's ABORT in Kafka"
            )
            job.stdin.write(b"exit\n")
            await job.stdin.drain()
            await asyncio.wait_for(job.wait(), timeout=120)
        finally:
            if job.returncode is None:
                job.kill()
                await job.wait()
            log.close()
        assert job.returncode == 0, (workdir / "job.log").read_text()[-3000:]
        metrics = await metrics_of(url)
    output = await asyncio.to_thread(read_all_produced_so_far, bootstrap, sink)
    result = Streaming(
        kafka=await asyncio.to_thread(_lineage, bootstrap, lineage_topic),
        archived=[
            orjson.loads(line)
            for f in finished_files(workdir / "all")
            for line in f.read_bytes().splitlines()
        ],
        status_while_running=status,
        metrics_at_end=metrics,
        output_lines=[r.value for r in output],
        canonical=canonical,
        source_topic=source,
        sink_topic=sink,
        lineage_topic=lineage_topic,
        rules=rules,
    )
    if dump := os.environ.get("FLINK_JOB_DUMP"):  # for working on the assertions
        await asyncio.to_thread(
            Path(dump).write_text, json.dumps(dataclasses.asdict(result), default=str)
        )
    yield result
