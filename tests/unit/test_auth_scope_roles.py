"""What a token's scope covers (proxy/auth/principal.py, proxy/openlineage/names.py): every
namespace that decides where an event goes or what it attaches to."""

from __future__ import annotations

import uuid

import pytest

from proxy.auth.principal import Principal
from tests.support.sample_events import dataset_event, job_event, run_event

TEAM_A = ("team-a*",)
DBS_A = ("postgres://db-a:*",)


def _principal(run_datasets: str = "unchecked") -> Principal:
    return Principal("team-a", TEAM_A, DBS_A, run_datasets)  # type: ignore[arg-type]


def _ids() -> str:
    return str(uuid.uuid4())


def test_a_run_under_another_teams_parent_or_root_job_is_refused_at_that_pointer():
    """Seen failing with only ``job.namespace`` checked (the old ``may_post_for`` on the
    subject): the team-a run hanging under team-b's DAG was accepted."""
    own = run_event(namespace="team-a", parent=("team-a", "dag", _ids()))
    assert _principal().refusal(own) is None
    under_b = run_event(namespace="team-a", parent=("team-b", "dag", _ids()))
    assert _principal().refusal(under_b) == (
        "/run/facets/parent/job/namespace",
        "team-b",
        "namespaces",
    )
    rooted_in_b = run_event(
        namespace="team-a", parent=("team-a", "task", _ids()), root=("team-b", "dag", _ids())
    )
    assert _principal().refusal(rooted_in_b) == (
        "/run/facets/parent/root/job/namespace",
        "team-b",
        "namespaces",
    )


@pytest.mark.parametrize(
    ("run_datasets", "refused_at"),
    [("unchecked", None), ("outputs", "/outputs/1/namespace"), ("all", "/inputs/0/namespace")],
)
def test_run_datasets_chooses_which_datasets_a_run_or_job_must_keep_in_scope(
    run_datasets, refused_at
):
    for event in (run_event(namespace="team-a"), job_event("team-a", "load")):
        event["inputs"] = [{"namespace": "s3://shared", "name": "raw"}]
        event["outputs"] = [
            {"namespace": "postgres://db-a:5432", "name": "mine"},
            {"namespace": "postgres://db-b:5432", "name": "theirs"},
        ]
        refusal = _principal(run_datasets).refusal(event)
        assert (refusal[0] if refusal else None) == refused_at
        if refusal:
            assert refusal[2] == "dataset_namespaces"


def test_dataset_events_use_the_dataset_scope_and_unrestricted_tokens_check_nothing():
    assert _principal().refusal(dataset_event("postgres://db-a:5432", "t")) is None
    assert _principal().refusal(dataset_event("team-a", "t")) == (
        "/dataset/namespace",
        "team-a",
        "dataset_namespaces",
    )
    anyone = Principal("any", ("*",), ("*",), "all")
    assert anyone.refusal(run_event(namespace="x", parent=("y", "p", _ids()))) is None
