"""Every match condition, including missing fields, wrong JSON types and unicode."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from routing_rules.matcher import compile_match, same_json_value
from routing_rules.schema import Match
from tests.support.sample_events import dataset_event, job_event, rich_run_event, run_event


def matches(match: dict[str, Any], event: dict[str, Any]) -> bool:
    return compile_match(Match.model_validate(match))(event)


def test_empty_match_holds_for_every_event():
    assert matches({}, run_event())
    assert matches({}, {})


@pytest.mark.parametrize(
    ("kind", "run", "job", "dataset"),
    [("run", True, False, False), ("job", False, True, False), ("dataset", False, False, True)],
)
def test_kind_tells_the_three_event_kinds_apart(kind, run, job, dataset):
    assert matches({"kind": kind}, run_event()) is run
    assert matches({"kind": kind}, job_event()) is job
    assert matches({"kind": kind}, dataset_event()) is dataset


def test_kind_list_is_any_of():
    assert matches({"kind": ["job", "dataset"]}, dataset_event())
    assert not matches({"kind": ["job", "dataset"]}, run_event())


def test_event_type_single_and_list_and_missing():
    assert matches({"event_type": "RUNNING"}, run_event(event_type="RUNNING"))
    assert not matches({"event_type": "RUNNING"}, run_event(event_type="START"))
    assert matches({"event_type": ["COMPLETE", "FAIL"]}, run_event(event_type="FAIL"))
    assert not matches({"event_type": "START"}, job_event())  # no eventType at all


def test_unknown_event_type_is_a_load_error():
    with pytest.raises(ValidationError, match="unknown eventType 'RUN'"):
        Match.model_validate({"event_type": "RUN"})


def test_job_namespace_exact_glob_regex_and_list():
    event = run_event(namespace="marketing-eu")
    assert matches({"job_namespace": "marketing-eu"}, event)
    assert not matches({"job_namespace": "marketing"}, event)
    assert matches({"job_namespace": "marketing-*"}, event)
    assert matches({"job_namespace": {"glob": "market?ng-eu"}}, event)
    assert matches({"job_namespace": {"regex": "^market"}}, event)
    assert matches({"job_namespace": {"regex": "-eu"}}, event)  # searched, not anchored
    assert not matches({"job_namespace": {"regex": "^eu"}}, event)
    assert matches({"job_namespace": ["payments", "marketing-*"]}, event)
    assert not matches({"job_namespace": ["payments", "sales"]}, event)


def test_glob_is_case_sensitive():
    assert not matches({"job_namespace": "Team-*"}, run_event(namespace="team-a"))


def test_job_namespace_of_wrong_type_or_missing_never_matches():
    event = run_event()
    event["job"]["namespace"] = 42
    assert not matches({"job_namespace": "*"}, event)
    assert not matches({"job_namespace": {"regex": "4"}}, event)
    assert not matches({"job_namespace": "*"}, dataset_event())  # no job at all
    assert not matches({"job_namespace": "*"}, {"job": "not a mapping"})


def test_unicode_namespaces_and_names():
    event = run_event(namespace="équipe-données", name="作业.每日")
    assert matches({"job_namespace": "équipe-*", "job_name": "作业.*"}, event)
    assert matches({"job_name": {"regex": "^作业\\.每日$"}}, event)
    assert not matches({"job_namespace": "equipe-*"}, event)


def test_job_name_and_producer():
    event = run_event(name="etl.daily")
    event["producer"] = "https://github.com/OpenLineage/OpenLineage/tree/1.20.0/integration/spark"
    assert matches({"job_name": "etl.*", "producer": "*integration/spark"}, event)
    assert not matches({"job_name": "etl.*", "producer": "*flink*"}, event)


def test_outputs_any_and_all():
    event = rich_run_event()
    event["outputs"].append({"namespace": "s3://lake", "name": "x"})
    assert matches({"outputs": {"any": {"namespace": "s3://*"}}}, event)
    assert not matches({"outputs": {"all": {"namespace": "s3://*"}}}, event)
    assert matches({"outputs": {"all": {"namespace": ["s3://*", "hive://*"]}}}, event)
    assert matches({"outputs": {"any": {"namespace": "hive://*", "name": "sales.*"}}}, event)
    assert not matches({"outputs": {"any": {"namespace": "hive://*", "name": "raw.*"}}}, event)


def test_all_needs_at_least_one_dataset():
    event = run_event()  # inputs: []
    assert not matches({"inputs": {"all": {"namespace": "*"}}}, event)
    del event["inputs"]
    assert not matches({"inputs": {"any": {"namespace": "*"}}}, event)


def test_dataset_conditions_skip_garbage_entries():
    event = run_event()
    event["inputs"] = ["not a dataset", {"namespace": 3, "name": "n"}, {"namespace": "file"}]
    assert matches({"inputs": {"any": {"namespace": "file"}}}, event)
    assert not matches({"inputs": {"any": {"namespace": "file", "name": "*"}}}, event)
    assert not matches({"inputs": {"all": {"namespace": "*"}}}, event)


def test_inputs_quantifier_needs_exactly_one_of_any_all():
    with pytest.raises(ValidationError, match="exactly one of any / all"):
        Match.model_validate({"inputs": {"any": {}, "all": {}}})


def test_dataset_of_a_dataset_event():
    event = dataset_event(namespace="s3://bucket", name="path/x")
    assert matches({"dataset": {"namespace": "s3://bucket", "name": "path/*"}}, event)
    assert not matches({"dataset": {"namespace": "s3://bucket"}}, run_event())


def test_has_facets_on_every_level():
    event = rich_run_event()
    assert matches({"has_facets": ["run.processing_engine", "job.sql"]}, event)
    assert matches({"has_facets": ["inputs.schema", "outputs.columnLineage"]}, event)
    assert matches({"has_facets": ["outputs.outputStatistics"]}, event)  # in outputFacets
    assert not matches({"has_facets": ["inputs.outputStatistics"]}, event)
    assert not matches({"has_facets": ["run.sql"]}, event)
    assert not matches({"has_facets": ["job.sql"]}, {"job": {"facets": None}})


def test_has_facets_reference_must_name_a_level():
    with pytest.raises(ValidationError, match="level one of run, job"):
        Match.model_validate({"has_facets": ["sql"]})


def test_field_equality_keeps_json_types_apart():
    event = rich_run_event()
    assert matches({"fields": {"run.facets.processing_engine.name": "spark"}}, event)
    assert not matches({"fields": {"run.facets.processing_engine.name": "flink"}}, event)
    stats = "outputs.0.outputFacets.outputStatistics.rowCount"
    assert matches({"fields": {stats: 10}}, event)
    assert matches({"fields": {stats: 10.0}}, event)
    assert not matches({"fields": {stats: "10"}}, event)
    event["run"]["facets"]["flag"] = {"on": True}
    assert matches({"fields": {"run.facets.flag.on": True}}, event)
    assert not matches({"fields": {"run.facets.flag.on": 1}}, event)


def test_field_null_is_not_missing():
    event = {"job": {"description": None}}
    assert matches({"fields": {"job.description": None}}, event)
    assert not matches({"fields": {"job.owner": None}}, event)


def test_field_tests_regex_glob_in_exists():
    event = rich_run_event()
    path = "job.facets.sql.query"
    assert matches({"fields": {path: {"regex": "(?i)insert into"}}}, event)
    assert matches({"fields": {path: {"glob": "INSERT *"}}}, event)
    assert matches({"fields": {"eventType": {"in": ["START", "COMPLETE"]}}}, event)
    assert not matches({"fields": {"eventType": {"in": ["RUNNING"]}}}, event)
    assert matches({"fields": {path: {"exists": True}}}, event)
    assert matches({"fields": {"job.facets.nope": {"exists": False}}}, event)
    assert not matches({"fields": {path: {"exists": False}}}, event)


def test_field_regex_on_non_string_does_not_match():
    event = rich_run_event()
    assert not matches(
        {"fields": {"outputs.0.outputFacets.outputStatistics.rowCount": {"regex": "1"}}}, event
    )


def test_field_with_wildcard_means_any_value():
    event = rich_run_event()
    assert matches({"fields": {"inputs.*.namespace": "s3://raw-bucket"}}, event)
    assert matches({"fields": {"outputs.*.facets.*._producer": {"glob": "https://*"}}}, event)
    assert not matches({"fields": {"inputs.*.namespace": "hdfs://x"}}, event)


def test_field_through_a_list_index_and_past_a_scalar():
    event = rich_run_event()
    assert matches({"fields": {"inputs.0.name": "orders"}}, event)
    assert not matches({"fields": {"inputs.7.name": "orders"}}, event)
    assert not matches({"fields": {"eventType.deeper": "x"}}, event)


def test_field_test_needs_exactly_one_key_and_valid_regex():
    with pytest.raises(ValidationError, match="exactly one of regex / glob / in / exists"):
        Match.model_validate({"fields": {"a": {"regex": "x", "glob": "y"}}})
    with pytest.raises(ValidationError, match="invalid regular expression"):
        Match.model_validate({"fields": {"a": {"regex": "("}}})
    with pytest.raises(ValidationError, match="empty segment"):
        Match.model_validate({"fields": {"a..b": 1}})


def test_all_any_not_combinators_nest():
    spark = rich_run_event(namespace="team-a")
    other = run_event(namespace="team-b")
    rule = {
        "any": [
            {"all": [{"job_namespace": "team-a"}, {"has_facets": ["run.processing_engine"]}]},
            {"job_namespace": "team-c"},
        ],
        "not": {"event_type": "RUNNING"},
    }
    assert matches(rule, spark)
    assert not matches(rule, other)
    assert matches(rule, run_event(namespace="team-c"))
    assert not matches(rule, run_event(namespace="team-c", event_type="RUNNING"))
    assert not matches({"any": []}, spark)  # no alternative holds
    assert matches({"all": []}, spark)


def test_same_json_value_rules():
    assert same_json_value(1, 1.0)
    assert not same_json_value(True, 1)
    assert not same_json_value(1, True)
    assert not same_json_value("a", ["a"])
    assert same_json_value(None, None)
