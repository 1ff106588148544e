"""Token scopes per event kind: job namespaces for runs and jobs, dataset namespaces for
DatasetEvents (docs/get-started/configuration.md)."""

from __future__ import annotations

import uuid

import orjson
import pytest
from aiohttp import ClientSession
from multidict import CIMultiDict

from tests.integration.test_lineage_endpoint import post
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.sample_events import dataset_event, job_event, run_event

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


async def test_parents_roots_and_written_datasets_are_in_scope_and_two_authorization_headers_400(
    start_proxy, broker, topic
):
    """A team-a token may not hang a run under team-b's DAG (parent or root job), nor,
    with ``run_datasets: outputs``, write into another team's database; a request with
    two Authorization headers is refused whichever comes first. Seen failing with only
    ``job.namespace`` checked (both runs landed in the topic) and with the first header
    winning (200 with the team-a token first, 401 with it second)."""
    auth = {
        "enabled": True,
        "tokens": [
            {"name": "team-a", "token": "secret-a", "namespaces": ["team-a*"]},
            {
                "name": "team-a-writer",
                "token": "secret-w",
                "namespaces": ["team-a*"],
                "dataset_namespaces": ["postgres://db-a:*"],
                "run_datasets": "outputs",
            },
        ],
    }
    ids = [str(uuid.uuid4()) for _ in range(3)]
    under_b = run_event(namespace="team-a", parent=("team-b", "dag", ids[0]))
    rooted_in_b = run_event(
        namespace="team-a", parent=("team-a", "task", ids[1]), root=("team-b", "dag", ids[2])
    )
    into_b = run_event(namespace="team-a")
    into_b["outputs"] = [{"namespace": "postgres://db-b:5432", "name": "orders"}]
    own = run_event(namespace="team-a", parent=("team-a", "dag", ids[0]))
    async with start_proxy(auth=auth) as url:
        endpoint = f"{url}/api/v1/lineage"
        for event, pointer in (
            (under_b, "/run/facets/parent/job/namespace"),
            (rooted_in_b, "/run/facets/parent/root/job/namespace"),
        ):
            status, body, _ = await post(endpoint, event, Authorization="Bearer secret-a")
            assert status == 403, body
            assert body["details"][0]["pointer"] == pointer
        # Without run_datasets the team-a token may write anywhere; the writer may not.
        assert (await post(endpoint, into_b, Authorization="Bearer secret-a"))[0] == 200
        status, body, _ = await post(endpoint, into_b, Authorization="Bearer secret-w")
        assert (status, body["details"][0]["pointer"]) == (403, "/outputs/0/namespace")
        for first, second in (("secret-a", "wrong"), ("wrong", "secret-a")):
            headers = CIMultiDict(
                [("Authorization", f"Bearer {first}"), ("Authorization", f"Bearer {second}")]
            )
            async with (
                ClientSession() as session,
                session.post(endpoint, data=orjson.dumps(own), headers=headers) as response,
            ):
                body = await response.json()
                assert response.status == 400, body
                assert body["details"] == [
                    {
                        "header": "Authorization",
                        "message": "send one: servers and proxies differ on which one counts",
                    }
                ]
        assert (await post(endpoint, own, Authorization="Bearer secret-a"))[0] == 200
    produced = read_all_produced_so_far(broker.bootstrap_servers, topic)
    landed = {orjson.loads(r.value)["run"]["runId"] for r in produced}  # across partitions
    assert landed == {into_b["run"]["runId"], own["run"]["runId"]}
