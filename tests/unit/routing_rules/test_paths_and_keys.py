"""Field paths (shared by matchers, redaction and key templates) and Kafka key strategies."""

from __future__ import annotations

import pytest

from proxy.kafka.keys import key_function
from proxy.openlineage.paths import MISSING, FieldPath
from tests.support.sample_events import dataset_event, job_event, rich_run_event, run_event


def test_get_follows_mappings_and_list_indexes():
    event = rich_run_event()
    assert FieldPath("job.namespace").get(event) == "team-a"
    assert FieldPath("inputs.0.name").get(event) == "orders"
    assert FieldPath("inputs.1.name").get(event) is MISSING
    assert FieldPath("job.namespace.deeper").get(event) is MISSING
    assert FieldPath("inputs.name").get(event) is MISSING


def test_wildcards_yield_every_value():
    event = rich_run_event()
    event["inputs"].append({"namespace": "file", "name": "b"})
    assert list(FieldPath("inputs.*.namespace").values(event)) == ["s3://raw-bucket", "file"]
    assert FieldPath("inputs.*.namespace").get(event) == "s3://raw-bucket"
    assert list(FieldPath("nothing.*").values(event)) == []


def test_replace_sets_existing_values_only():
    event = {"a": {"b": 1}, "l": [{"x": 1}, {"y": 2}]}
    assert FieldPath("a.b").replace(event, "R") == 1
    assert FieldPath("a.c").replace(event, "R") == 0
    assert FieldPath("l.*.x").replace(event, "R") == 1
    assert FieldPath("l.1").replace(event, "R") == 1
    assert event == {"a": {"b": "R"}, "l": [{"x": "R"}, "R"]}


def test_empty_segments_are_refused():
    for bad in ("", "a.", ".a", "a..b"):
        with pytest.raises(ValueError, match="empty segment"):
            FieldPath(bad)


def test_json_pointers_read_tokens_literally():
    event = {"run": {"facets": {"a.b": {"*": [1, {"x/y": 2}]}}}}
    assert FieldPath.from_pointer("/run/facets/a.b/*/1/x~1y").get(event) == 2
    assert FieldPath.from_pointer("").get(event) is event
    assert FieldPath.from_pointer("/run/nothing").get(event) is MISSING
    with pytest.raises(ValueError, match="must start with '/'"):
        FieldPath.from_pointer("run")


def test_key_strategies():
    parent = ("dag-ns", "dag", "0176a8c2-fe01-7439-87e6-56a1a1b4029f")
    event = rich_run_event(namespace="team-a", name="etl.daily", parent=parent)
    # A run is keyed by its own runId, with or without the parent facet (issue 36: the
    # root job's key split a run whose later events left the facet out).
    assert key_function("run")(event) == f"run:{event['run']['runId']}"
    bare = {**event, "run": {"runId": event["run"]["runId"]}}
    assert key_function("run")(bare) == key_function("run")(event)
    assert key_function("job")(event) == "job:team-a/etl.daily"
    assert key_function("dataset")(event) == "dataset:hive://metastore:9083/sales.daily"
    assert key_function("dataset")(dataset_event("s3://b", "k")) == "dataset:s3://b/k"
    assert key_function("dataset")(run_event()) is None
    assert key_function("none")(event) is None
    assert key_function("job")(job_event("n", "j")) == "job:n/j"


def test_key_templates_render_field_paths():
    event = run_event(namespace="équipe", name="j")
    assert key_function("{job.namespace}")(event) == "équipe"
    assert key_function("{job.namespace}/{run.runId}")(event) == f"équipe/{event['run']['runId']}"
    assert key_function("x-{job.facets}-{nope}")(event) == "x--"  # non-strings render empty


@pytest.mark.parametrize(
    ("strategy", "message"),
    [
        ("partition", "unknown key strategy"),
        ("{job.namespace", "expected '}'"),
        ("{}", "empty {}"),
        ("{job.name:>10}", "format specs are not supported"),
        ("{a..b}", "empty segment"),
    ],
)
def test_bad_key_strategies_are_refused(strategy: str, message: str):
    with pytest.raises(ValueError, match=message):
        key_function(strategy)
