"""The real openlineage-python client, configured only by environment, talks to the proxy."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import orjson
import pytest
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.facet_v2 import parent_run, sql_job

from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.load import landed_before_a_marker

pytestmark = pytest.mark.integration

TOKEN = "client-secret-token"
AUTH = {"enabled": True, "tokens": [{"name": "airflow", "token": TOKEN, "namespaces": ["*"]}]}


def _client_event(run_id: str) -> RunEvent:
    parent = parent_run.ParentRunFacet(
        run=parent_run.Run(runId=str(uuid.uuid4())),
        job=parent_run.Job(namespace="airflow", name="dag_x"),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=str(uuid.uuid4())),
            job=parent_run.RootJob(namespace="airflow", name="dag_x"),
        ),
    )
    return RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=datetime.now(UTC).isoformat(),
        run=Run(runId=run_id, facets={"parent": parent}),
        job=Job(
            namespace="airflow",
            name="dag_x.task_y",
            facets={"sql": sql_job.SQLJobFacet(query="SELECT 1")},
        ),
        producer="https://github.com/apache/airflow",
    )


def _clear_openlineage_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("OPENLINEAGE"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    ("variant", "env"),
    [
        ("plain", {}),
        ("prefix+api-key", {"OPENLINEAGE_API_KEY": TOKEN}),
        (
            "gzip+api-key",
            {
                "OPENLINEAGE__TRANSPORT__TYPE": "http",
                "OPENLINEAGE__TRANSPORT__COMPRESSION": "gzip",
                "OPENLINEAGE__TRANSPORT__AUTH": orjson.dumps(
                    {"type": "api_key", "apiKey": TOKEN}
                ).decode(),
            },
        ),
    ],
)
async def test_client_events_arrive_in_kafka_keyed_by_root_job(
    start_proxy, broker, topic, monkeypatch, variant, env
):
    _clear_openlineage_env(monkeypatch)
    sections = {"auth": AUTH} if "api-key" in variant else {}
    async with start_proxy(**sections) as url:
        base = f"{url}/openlineage" if "prefix" in variant else url
        monkeypatch.setenv("OPENLINEAGE_URL", base)
        if "OPENLINEAGE__TRANSPORT__TYPE" in env:
            monkeypatch.setenv("OPENLINEAGE__TRANSPORT__URL", base)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        run_id = str(uuid.uuid4())
        client = OpenLineageClient()
        # The client is synchronous; run it off the loop that serves the proxy.
        await asyncio.to_thread(client.emit, _client_event(run_id))
        await asyncio.to_thread(client.close)
    [record] = read_all_produced_so_far(broker.bootstrap_servers, topic)
    assert record.key == f"run:{run_id}"
    event = orjson.loads(record.value)
    assert event["run"]["runId"] == run_id
    assert event["job"]["facets"]["sql"]["query"] == "SELECT 1"
    assert event["eventType"] == "COMPLETE"


async def test_client_with_wrong_api_key_is_refused_and_nothing_lands(
    start_proxy, broker, topic, monkeypatch
):
    _clear_openlineage_env(monkeypatch)
    async with start_proxy(auth=AUTH) as url:
        monkeypatch.setenv("OPENLINEAGE_URL", url)
        monkeypatch.setenv("OPENLINEAGE_API_KEY", "wrong")
        client = OpenLineageClient()
        with pytest.raises(Exception, match="401"):
            await asyncio.to_thread(client.emit, _client_event(str(uuid.uuid4())))
        # The refused event is keyed by its root job, airflow/dag_x: so is the marker.
        landed = await landed_before_a_marker(
            url,
            broker.bootstrap_servers,
            topic,
            namespace="airflow",
            name="dag_x",
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
    assert landed == []
