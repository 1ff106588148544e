"""Token scopes per event kind: job namespaces for runs and jobs, dataset namespaces for
DatasetEvents (docs/guide/configuration.md)."""

from __future__ import annotations

import orjson
import pytest

from tests.integration.test_lineage_endpoint import post
from tests.sample_events import dataset_event, job_event, run_event
from tests.support.kafka_reader import read_all_produced_so_far

pytestmark = pytest.mark.integration

POSTGRES = "postgres://db:5432"
AUTH = {
    "enabled": True,
    "tokens": [
        {"name": "team-a", "token": "secret-a", "namespaces": ["team-a*"]},
        {
            "name": "team-a-db",
            "token": "secret-a-db",
            "namespaces": ["team-a*"],
            "dataset_namespaces": ["postgres://db:*"],
        },
    ],
}


async def test_dataset_events_are_scoped_by_dataset_namespaces_and_runs_by_job_namespace(
    start_proxy, broker, topic
):
    team_a, team_a_db = (
        {"Authorization": "Bearer secret-a"},
        {"Authorization": "Bearer secret-a-db"},
    )
    writes_to_postgres = run_event(namespace="team-a")
    writes_to_postgres["outputs"] = [{"namespace": POSTGRES, "name": "shop.public.orders"}]
    async with start_proxy(auth=AUTH) as url:
        endpoint = f"{url}/api/v1/lineage"
        # Without dataset_namespaces the token's namespaces stand in: team-a* ≠ postgres://…
        status, body, _ = await post(
            endpoint, dataset_event(POSTGRES, "shop.public.orders"), **team_a
        )
        assert status == 403
        assert body["details"] == [
            {
                "pointer": "/dataset/namespace",
                "message": "namespace outside the token's dataset_namespaces",
            }
        ]
        # A run's datasets are what the job touched: not scoped.
        assert (await post(endpoint, writes_to_postgres, **team_a))[0] == 200
        # dataset_namespaces opens DatasetEvents for postgres only, not for team-a*...
        assert (await post(endpoint, dataset_event(POSTGRES, "shop.public.orders"), **team_a_db))[
            0
        ] == 200
        status, body, _ = await post(endpoint, dataset_event("team-a-files", "x"), **team_a_db)
        assert status == 403
        assert body["details"][0]["message"] == "namespace outside the token's dataset_namespaces"
        # ...and does not widen the job scope.
        status, body, _ = await post(endpoint, run_event(namespace=POSTGRES), **team_a_db)
        assert status == 403 and body["details"][0]["pointer"] == "/job/namespace"
    # Read up to markers behind everything produced so far: the refused events would be
    # there, not merely "not seen yet".
    produced = read_all_produced_so_far(broker.bootstrap_servers, topic)
    landed = [orjson.loads(r.value) for r in produced]
    assert sorted("run" if "run" in e else e["dataset"]["namespace"] for e in landed) == [
        POSTGRES,
        "run",
    ]


async def test_job_events_are_scoped_by_job_namespace_single_and_in_a_batch(
    start_proxy, broker, topic
):
    """A JobEvent has no run, but its job namespace decides where it goes as a run's
    does: a ``team-a*`` token posting one for ``team-b`` gets 403 naming
    ``/job/namespace`` (``/1/job/namespace`` inside a batch), and nothing of it lands.
    Seen failing with the scope check skipped for JobEvents (``pipeline.check`` asking
    ``may_post_for`` only when ``event_kind(event) is EventKind.RUN``): both got 200 and
    the team-b JobEvents were in the topic."""
    team_a = {"Authorization": "Bearer secret-a"}
    outside = {"pointer": "/job/namespace", "message": "namespace outside the token's namespaces"}
    writes_to_postgres = job_event("team-a-etl", "load")
    writes_to_postgres["outputs"] = [{"namespace": POSTGRES, "name": "shop.public.orders"}]
    async with start_proxy(auth=AUTH) as url:
        status, body, _ = await post(f"{url}/api/v1/lineage", job_event("team-b", "x"), **team_a)
        assert status == 403
        assert body["details"] == [outside]
        batch = [writes_to_postgres, job_event("team-b", "y")]
        status, body, _ = await post(f"{url}/api/v1/lineage/batch", batch, **team_a)
        assert status == 200 and body["summary"]["successful"] == 1
        [failed] = body["failed_events"]
        assert failed["index"] == 1 and failed["status"] == 403
        assert failed["details"] == [{**outside, "pointer": "/1/job/namespace"}]
    produced = read_all_produced_so_far(broker.bootstrap_servers, topic)
    assert [orjson.loads(r.value)["job"] for r in produced] == [writes_to_postgres["job"]]
