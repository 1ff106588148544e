"""The official OpenLineage Spark integration (the jar from Maven Central) pointed at the
proxy, and side by side with our emitter on the same jobs.

One PySpark process (``side_by_side_jobs.py``) runs the conformance jobs with both
listeners: the jar's, configured as its users configure it (``spark.jars``,
``spark.extraListeners``, ``spark.openlineage.transport.*`` with an api key), and ours.
The jar's transport is a composite of the http transport to the proxy and a file copy of
what it sent, so the test knows every event the jar emitted and can find each one in Kafka
and in the archive. Our emitter posts to a plain recorder. One JVM serves all of it: on a
2-core machine a Spark start is the cost.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import pytest_asyncio

from proxy.destinations.archive.layout import finished_files
from proxy.server.serve import listener_tls, serving
from proxy.web.app import create_app
from tests.spark.conftest import LineageReceiver, event_types
from tests.spark.side_by_side import (
    Difference,
    compare,
    documented_differences,
    documented_job_names,
)
from tests.spark.side_by_side_jobs import APP_NAME, NAMESPACE, UNREPORTED
from tests.support.kafka_cluster import KafkaCluster
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.paths import REPO
from tests.support.proxies import proxy_config

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]

TOKEN = "spark-jar-token"
AUTH = {"enabled": True, "tokens": [{"name": "spark", "token": TOKEN, "namespaces": [NAMESPACE]}]}
LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"
CONFORMANCE_PAGE = REPO / "docs" / "spark-conformance.md"


def official_jar() -> str:
    """The jar's path, fetched into the cache by the project's script on first use."""
    done = subprocess.run(
        [str(REPO / "scripts" / "openlineage_spark_jar.sh")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def jar_conf(proxy_url: str, copy: Path) -> dict[str, str]:
    """The jar's settings: docs/clients/spark.md shows the plain http form; here the
    same http transport is one leg of a composite whose other leg is a file copy."""
    transport = "spark.openlineage.transport."
    proxy = transport + "transports.proxy."
    return {
        "spark.jars": official_jar(),
        "spark.extraListeners": LISTENER,
        transport + "type": "composite",
        proxy + "type": "http",
        proxy + "url": proxy_url,
        proxy + "auth.type": "api_key",
        proxy + "auth.apiKey": TOKEN,
        transport + "transports.copy.type": "file",
        transport + "transports.copy.location": str(copy),
        # Nothing else: both sides run with their defaults (column lineage's INDIRECT
        # edges once per dataset, the jar's default and ours), as a new user runs them.
    }


@dataclass
class SideBySide:
    workdir: Path
    windows: list[dict[str, Any]]
    ours_stats: dict[str, int]
    official_sent: list[dict[str, Any]]  # the jar's own copy of what it sent
    ours: list[dict[str, Any]]
    kafka: list[tuple[str | None, dict[str, Any], list[dict[str, str]]]]  # key, event, repairs
    archived: list[dict[str, Any]]


async def _run_jobs(workdir: Path, ours_url: str, conf: dict[str, str]) -> dict[str, Any]:
    env = {**os.environ, "SIDE_BY_SIDE_CONF": json.dumps(conf), "PYTHONPATH": str(REPO)}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.spark.side_by_side_jobs",
        str(workdir),
        ours_url,
        env=env,
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=1500)
    assert process.returncode == 0, stderr.decode()[-3000:]
    return dict(json.loads(stdout.decode().strip().splitlines()[-1]))


@pytest_asyncio.fixture(scope="module")
async def side_by_side(
    broker: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[SideBySide]:
    workdir = tmp_path_factory.mktemp("side_by_side")
    # The cluster is shared by every xdist worker, whose temporary folders may share names.
    topic = f"test.spark-jar.{uuid.uuid4().hex[:12]}"
    archive = workdir / "archive"
    config = proxy_config(
        broker.bootstrap_servers,
        topic,
        auth=AUTH,
        server={"host": "127.0.0.1", "port": 0},
        routing={"archive_root": archive},
    )
    receiver = LineageReceiver()
    copy = workdir / "official.jsonl"
    try:
        async with serving(create_app(config), listener_tls(config)) as port:
            conf = jar_conf(f"http://127.0.0.1:{port}", copy)
            summary = await _run_jobs(workdir / "jobs", receiver.url, conf)
    finally:
        receiver.close()
    records = await asyncio.to_thread(read_all_produced_so_far, broker.bootstrap_servers, topic)
    result = SideBySide(
        workdir=workdir / "jobs",
        windows=summary["windows"],
        ours_stats=summary["ours"],
        official_sent=[json.loads(line) for line in copy.read_text().splitlines()],
        ours=receiver.events,
        kafka=[
            (r.key, orjson.loads(r.value), orjson.loads(r.headers.get("ol_repairs", b"[]")))
            for r in records
        ],
        archived=[
            orjson.loads(line)
            for f in finished_files(archive / "events")
            for line in f.read_bytes().splitlines()
        ],
    )
    if dump := os.environ.get("SIDE_BY_SIDE_DUMP"):  # for working on the comparison
        text = json.dumps(dataclasses.asdict(result), default=str)
        await asyncio.to_thread(Path(dump).write_text, text)
    yield result


def _repaired(event: dict[str, Any], repairs: list[dict[str, str]]) -> dict[str, Any]:
    """``event`` with each repair applied, after checking it had the repair's "from"."""
    copy = json.loads(json.dumps(event))
    for repair in repairs:
        *path, last = [
            p.replace("~1", "/").replace("~0", "~") for p in repair["pointer"][1:].split("/")
        ]
        parent: Any = copy
        for part in path:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        assert str(parent[last]) == repair["from"], repair
        parent[last] = repair["to"]
    return copy


def _run(event: dict[str, Any]) -> str:
    run_id: str = event["run"]["runId"]
    return run_id


def _key(event: dict[str, Any]) -> tuple[str, str, str]:
    return event["run"]["runId"], event["eventTime"], event["eventType"]


def test_every_event_of_the_official_jar_reaches_kafka_and_the_archive(
    side_by_side: SideBySide,
) -> None:
    sent = side_by_side.official_sent
    runs = {e["run"]["runId"] for e in sent}
    assert len(sent) >= 40 and len(runs) >= 20, (len(sent), len(runs))
    kafka = [event for _, event, _ in side_by_side.kafka]
    # Every event the jar sent, once, and nothing else; each run under its own key
    # (run:{runId}), so in one partition, in the order the jar sent that run's events.
    assert sorted(_key(e) for e in kafka) == sorted(_key(e) for e in sent)
    # The proxy forwards the jar's JSON as it came, but for the values it repaired, each
    # named in the record's ol_repairs header (from what, to what).
    # The one repair (docs/clients/spark.md): the jar's dataSource uri "file", not a URI,
    # becomes file:/// on the datasets that have it.
    repairs = [
        (repair["repair"], re.sub(r"/\d+/", "/N/", repair["pointer"]), repair["from"], repair["to"])
        for _, _, made in side_by_side.kafka
        for repair in made
    ]
    assert len(repairs) >= 100, len(repairs)
    assert set(repairs) == {
        ("schemeless_datasource_uri", f"/{side}/N/facets/dataSource/uri", "file", "file:///")
        for side in ("inputs", "outputs")
    }
    # Each landed event is the jar's, as sent but for its repairs. The order within a run
    # is not compared with the file copy: the composite transport hands an event to its
    # legs separately, so its file and its HTTP posts need not agree on the order of two
    # events of one run sent close together (the per-run order through the proxy is held
    # by tests/faults/test_scale_out.py, where no run is out of order).
    # Two events of a run may share a time and a type (the jar's FAILs of one run, with
    # different stack traces): each landed event takes one of the sent ones it equals.
    unmatched: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for event in sent:
        unmatched.setdefault(_key(event), []).append(event)
    for run_id in runs:
        landed = [(key, e, made) for key, e, made in side_by_side.kafka if _run(e) == run_id]
        assert {key for key, _, _ in landed} == {f"run:{run_id}"}
        for _, event, made in landed:
            candidates = unmatched[_key(event)]
            match = next((e for e in candidates if _repaired(e, made) == event), None)
            assert match is not None, (event, candidates)
            candidates.remove(match)
    assert sorted(_key(e) for e in side_by_side.archived) == sorted(_key(e) for e in sent)
    # The application run opens and closes its run; the failing job says FAIL.
    app = [e for e in kafka if e["job"]["name"] == APP_NAME]
    assert (app[0]["eventType"], app[-1]["eventType"]) == ("START", "COMPLETE")
    refunds = [e for e in kafka if e["job"]["name"].endswith("out_refunds")]
    assert "FAIL" in event_types(refunds)


def test_our_emitter_sent_everything_it_built(side_by_side: SideBySide) -> None:
    stats = side_by_side.ours_stats
    assert (stats["failed"], stats["dropped"]) == (0, 0)
    assert stats["sent"] == len(side_by_side.ours) > 0


def _row(difference: Difference) -> str:
    return (
        f"| {difference.job} | {difference.aspect} | {difference.official[:200]} | "
        f"{difference.ours[:200]} |"
    )


def test_every_difference_from_the_official_jar_is_documented(side_by_side: SideBySide) -> None:
    found = compare(
        side_by_side.official_sent,
        side_by_side.ours,
        side_by_side.windows,
        side_by_side.workdir,
        APP_NAME,
    )
    documented = documented_differences(CONFORMANCE_PAGE)
    everywhere = {aspect for job, aspect in documented if job == "*"}
    undocumented = [
        d for d in found if (d.job, d.aspect) not in documented and d.aspect not in everywhere
    ]
    assert not undocumented, "not in docs/spark-conformance.md:\n" + "\n".join(
        _row(d) for d in undocumented
    )
    our_names = documented_job_names(CONFORMANCE_PAGE)
    renamed = [
        d for d in found if d.aspect == "job name" and f"`{d.ours}`" not in our_names.get(d.job, "")
    ]
    assert not renamed, "job names not in their rows:\n" + "\n".join(_row(d) for d in renamed)
    # The "*" row on outputStatistics is the jar's statistics missing now and then; ours
    # missing where the jar's are there is not covered by it, only by a row of the job's.
    statistics = "output facet outputStatistics"
    ours_missing = [
        d
        for d in found
        if d.aspect == statistics and d.ours == "—" and (d.job, statistics) not in documented
    ]
    assert not ours_missing, ours_missing
    seen = {(d.job, d.aspect) for d in found}
    stale = sorted(
        (job, aspect)
        for (job, aspect), may_be_absent in documented.items()
        if not may_be_absent
        and (job, aspect) not in seen
        and (job != "*" or aspect not in {a for _, a in seen})
    )
    assert not stale, f"rows of docs/spark-conformance.md that no longer differ: {stale}"


def test_the_conformance_jobs_were_seen_by_both(side_by_side: SideBySide) -> None:
    """Each job has at least one run on each side: the windows are not empty by accident;
    but for the jobs that neither side reports (a query refused in analysis), which have
    none on either."""
    from tests.spark.side_by_side import runs_in_windows

    for events in (side_by_side.official_sent, side_by_side.ours):
        per_job = runs_in_windows(events, side_by_side.windows)
        assert [job for job, runs in per_job.items() if not runs] == sorted(UNREPORTED)
