"""The proxy is invisible to Marquez: the same events, once POSTed straight to a real
Marquez and once sent client → proxy → Kafka → ``lineage-proxy consume`` → another real
Marquez, leave the same namespaces, jobs, runs (states, durations), datasets, dataset
versions, column lineage and lineage graphs behind, as Marquez's own API shows them.

"The same events" are what each client itself sent, recorded on the client's side: the
openlineage-python test, our Spark emitter and dbt-ol send through the client's composite
transport to the proxy and to a file at once, so the file is the independent record of
what the client emitted, POSTed as-is to ``direct``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from typing import Any

import attr
import orjson
import pytest
import yaml
from aiohttp import ClientSession
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import RunEvent, RunState

from tests.integration.marquez.conftest import consuming_into
from tests.integration.marquez.fidelity_corpus import corpus, refused_by_marquez
from tests.support.client_events import every_facet_event
from tests.support.consumers import create_topic, status_of
from tests.support.dbt import dbt_ol
from tests.support.figures import report
from tests.support.marquez import MarquezServer
from tests.support.marquez_state import (
    TIED_FACET_MARK,
    differences,
    marquez_view,
    post_events,
    stored_events,
)
from tests.support.metrics import total
from tests.support.paths import REPO
from tests.support.recording_client import recording_config, sent_events
from tests.support.waiting import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.marquez,
    pytest.mark.xdist_group("marquez"),
    # A cold Marquez JVM (migrations included) takes ~2 min to start on a loaded 2-core box.
    pytest.mark.timeout(900),
]


async def _assert_same_in_marquez(
    marquez: dict[str, MarquezServer], sent: list[dict[str, Any]]
) -> dict[str, Any]:
    """Wait until ``proxied`` stored every event, POST ``sent`` to ``direct``, compare."""
    namespaces = {e["job"]["namespace"] for e in sent}
    proxied, direct = marquez["proxied"].url, marquez["direct"].url

    def landed() -> bool:
        return sum(len(stored_events(proxied, ns)) for ns in namespaces) >= len(sent)

    await wait_for(lambda: asyncio.to_thread(landed), within=180, what="Marquez (proxied)")
    statuses = await asyncio.to_thread(post_events, direct, sent)
    assert set(statuses) == {201}, statuses
    direct_view = await asyncio.to_thread(marquez_view, direct, sent)
    proxied_view = await asyncio.to_thread(marquez_view, proxied, sent)
    assert direct_view["jobs"] and direct_view["datasets"]  # the comparison compares something
    assert differences(direct_view, proxied_view) == []
    return direct_view


def _states(view: dict[str, Any]) -> set[str]:
    return {run["state"] for job in view["jobs"].values() for run in job["runs"]}


async def test_openlineage_python_events_look_the_same_in_marquez(
    marquez, start_proxy, broker, topic, tmp_path
):
    namespace = f"olpy-{uuid.uuid4().hex[:8]}"
    emitted: list[RunEvent] = []
    # The second run starts after the first ended: Marquez orders a job's runs by their
    # start, and two runs that started at the same instant make its latestRun a coin toss
    # (the proxy keeps order within a run, not between runs: they are different keys).
    for hour, final in ((10, RunState.COMPLETE), (11, RunState.FAIL)):
        start = every_facet_event(
            event_type=RunState.START, namespace=namespace, hosts=f"-{namespace}"
        )
        start = attr.evolve(start, eventTime=f"2026-11-23T{hour}:00:00.000Z")
        emitted += [
            start,
            attr.evolve(start, eventType=final, eventTime=f"2026-11-23T{hour}:02:03.500Z"),
        ]
    async with (
        start_proxy() as url,
        consuming_into(tmp_path, broker.bootstrap_servers, topic, marquez["proxied"].url),
    ):
        # What the client sends is more than what it was given (1.54 adds an
        # openlineage_client_version tag): its own file transport records the sent events.
        config = yaml.safe_load(recording_config(tmp_path, url).read_text())
        client = OpenLineageClient(config=config)
        for event in emitted:
            await asyncio.to_thread(client.emit, event)
        events = sent_events(tmp_path)
        assert len(events) == len(emitted)
        view = await _assert_same_in_marquez(marquez, events)
    assert _states(view) == {"COMPLETED", "FAILED"}
    # every_facet_event sends dataQualityMetrics as a dataset and as an input facet: the
    # value Marquez shows was matched against what was sent, not left out.
    assert TIED_FACET_MARK in repr(view["datasets"])
    durations = {run.get("durationMs") for job in view["jobs"].values() for run in job["runs"]}
    assert durations == {123_500}


@pytest.mark.spark
async def test_spark_emitter_pipeline_looks_the_same_in_marquez(
    marquez, start_proxy, broker, topic, tmp_path
):
    namespace = f"spark-{uuid.uuid4().hex[:8]}"
    async with (
        start_proxy() as url,
        consuming_into(tmp_path, broker.bootstrap_servers, topic, marquez["proxied"].url),
    ):
        environ = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "spark_emitter.examples.etl_pipeline",
            "--workdir",
            str(tmp_path / "etl"),
            env={
                **environ,
                "OPENLINEAGE_CONFIG": str(recording_config(tmp_path, url)),
                "OPENLINEAGE_NAMESPACE": namespace,
                "PYTHONPATH": str(REPO),
            },
            cwd=REPO,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=600)
        assert process.returncode == 0, stderr.decode()[-3000:]
        sent = sent_events(tmp_path)
        view = await _assert_same_in_marquez(marquez, sent)
    assert "COMPLETED" in _states(view)
    assert any(d["columnLineage"]["graph"] for d in view["datasets"].values())


async def test_dbt_ol_build_looks_the_same_in_marquez(
    marquez, start_proxy, broker, topic, dbt_bin, tmp_path
):
    namespace = f"dbt-{uuid.uuid4().hex[:8]}"
    async with (
        start_proxy() as url,
        consuming_into(tmp_path, broker.bootstrap_servers, topic, marquez["proxied"].url),
    ):
        process = await dbt_ol(
            dbt_bin, tmp_path, url, "build", "--exclude", "endless", namespace=namespace
        )
        assert await asyncio.wait_for(process.wait(), 300) == 0, (
            tmp_path / "dbt-ol.log"
        ).read_text()
        sent = sent_events(tmp_path)
        view = await _assert_same_in_marquez(marquez, sent)
    assert "COMPLETED" in _states(view)


async def test_an_order_sensitive_corpus_looks_the_same_in_marquez_with_default_settings(
    marquez, start_proxy, broker, topic, tmp_path
):
    """Issue 36's corpus (tests/integration/marquez/fidelity_corpus.py): two DAGs
    interleaved, children whose later events carry no facets, a reader of another DAG's
    write, a schema change, JobEvents and a NUL — sent through the proxy by one client and
    consumed with the default settings into ``proxied``, and POSTed one by one to
    ``direct``. The two must show the same graph; what Marquez refuses (500 when fed
    directly) is sent at most once and dead-lettered, never retried.

    The consumer starts after every event was acknowledged: a backlog over 6 partitions,
    the hardest case for the merge. Seen failing with the consumer in ``ordering: run``
    (lanes per run key, the previous default): 38 and 53 differences in two runs; and in
    acknowledgement order before the merge waited for partitions with unread records,
    16 differences in one CI run under CPU load (a partition's first fetch came later
    than the reorder window)."""
    namespace = f"fidelity-{uuid.uuid4().hex[:8]}"
    sent = corpus(namespace)
    await asyncio.to_thread(create_topic, broker.bootstrap_servers, topic, 6)
    refused = [e for e in sent if refused_by_marquez(e)]
    taken = [e for e in sent if not refused_by_marquez(e)]
    proxied, direct = marquez["proxied"].url, marquez["direct"].url
    async with start_proxy() as url, ClientSession() as session:
        for event in sent:  # one client: each event after the last was acknowledged
            async with session.post(f"{url}/api/v1/lineage", data=orjson.dumps(event)) as r:
                assert r.status == 200, await r.text()
    async with consuming_into(tmp_path, broker.bootstrap_servers, topic, proxied) as port:
        await wait_for(
            lambda: _handled(port, delivered=len(taken), dead_lettered=len(refused)),
            within=180,
            what="the consumer to deliver what Marquez takes and dead-letter the rest",
        )
        _, metrics = await status_of(port, "/metrics")
        dead_lettered = total(metrics, "lineage_consumer_dead_lettered_total")
    statuses = await asyncio.to_thread(post_events, direct, sent)
    direct_view = await asyncio.to_thread(marquez_view, direct, taken)
    proxied_view = await asyncio.to_thread(marquez_view, proxied, taken)
    found = differences(direct_view, proxied_view)
    report(
        "marquez (real): order-sensitive corpus, direct vs through the proxy",
        sent=len(sent),
        refused_directly=statuses.count(500),
        dead_lettered=dead_lettered,
        stored_through_proxy=len(stored_events(proxied, namespace)),
        differences=len(found),
    )
    assert [s for s, e in zip(statuses, sent, strict=True) if refused_by_marquez(e)] == [500] * len(
        refused
    )
    assert dead_lettered == len(refused)
    runs_taken = [e for e in taken if "run" in e]
    assert len(stored_events(proxied, namespace)) == len(runs_taken)
    assert direct_view["jobs"] and direct_view["datasets"]
    # Fed directly, Marquez 0.50 writes the refused JobEvent's output dataset version (at
    # its event time) *before* its runUuid NullPointerException; the consumer sends it
    # once too, so that version is there on both. Seen failing when the consumer
    # dead-lettered it unsent: versions[1]/createdAt 09:00:09 != 09:00:10.
    assert found == []
    assert _states(direct_view) >= {"COMPLETED", "FAILED"}


async def _handled(port: int, *, delivered: int, dead_lettered: int) -> bool:
    """The consumer's own counts (Marquez lists no JobEvent among its stored events)."""
    _, metrics = await status_of(port, "/metrics")
    return (
        total(metrics, "lineage_consumer_delivered_total"),
        total(metrics, "lineage_consumer_dead_lettered_total"),
    ) == (delivered, dead_lettered)
