"""Transforms: drop facets, redact, map namespaces, add tags — on a copy of the event."""

from __future__ import annotations

import copy
from typing import Any

from proxy.destinations.kafka.destination import event_headers
from proxy.ingest.live_rules import RulesRouter
from proxy.openlineage.repaired import Repair, RepairedEvent
from routing_rules.ruleset import Trace
from routing_rules.transforms import PRODUCER, REDACTED
from tests.support.sample_events import dataset_event, rich_run_event, run_event
from tests.unit.routing_rules.helpers import ruleset


def sent(rules_body: str, event: dict) -> tuple[dict, Trace]:
    trace = Trace()
    route = ruleset(rules_body).route(event, trace)
    return route.event, trace


def test_transforms_never_touch_the_callers_event():
    event = rich_run_event()
    before = copy.deepcopy(event)
    out, _ = sent(
        """
        rules:
          - transform: [{redact: [job.facets.sql.query]}, {drop_facets: [schema]}]
            to: [a]
        default: {to: [b]}
        """,
        event,
    )
    assert event == before
    assert out["job"]["facets"]["sql"]["query"] == REDACTED


def test_drop_facets_by_name_and_glob_everywhere():
    event = rich_run_event()
    event["run"]["facets"]["spark_properties"] = {"_producer": "p", "_schemaURL": "s"}
    event["run"]["facets"]["spark_version"] = {"_producer": "p", "_schemaURL": "s"}
    out, trace = sent(
        """
        rules:
          - transform: [{drop_facets: [schema, "spark_*", outputStatistics, absent]}]
            to: [a]
        default: {to: [b]}
        """,
        event,
    )
    assert "spark_properties" not in out["run"]["facets"]
    assert "spark_version" not in out["run"]["facets"]
    assert "processing_engine" in out["run"]["facets"]
    assert "schema" not in out["inputs"][0]["facets"]
    assert "schema" not in out["outputs"][0]["facets"]
    assert "columnLineage" in out["outputs"][0]["facets"]
    assert out["outputs"][0]["outputFacets"] == {}
    assert trace.transforms[0][2] == 5


def test_drop_facets_tolerates_odd_shapes():
    event: dict[str, Any] = {
        "run": {"facets": None},
        "job": "x",
        "inputs": [None, {"facets": []}],
    }
    out, trace = sent(
        "rules: [{transform: [{drop_facets: [a]}], to: [a]}]\ndefault: {to: [b]}", event
    )
    assert out == event and trace.transforms[0][2] == 0


def test_redact_paths_with_wildcards_and_missing_paths():
    event = rich_run_event()
    out, trace = sent(
        """
        rules:
          - transform:
              - redact: [job.facets.sql.query, "inputs.*.facets.dataSource.uri", job.facets.nope.x]
            to: [a]
        default: {to: [b]}
        """,
        event,
    )
    assert out["job"]["facets"]["sql"]["query"] == REDACTED
    assert out["inputs"][0]["facets"]["dataSource"]["uri"] == REDACTED
    assert "nope" not in out["job"]["facets"]  # nothing created
    assert trace.transforms == [
        (
            "rule-1",
            "redact job.facets.sql.query, inputs.*.facets.dataSource.uri, job.facets.nope.x",
            2,
        )
    ]


def test_redact_replaces_non_string_values_too():
    event = rich_run_event()
    out, _ = sent(
        "rules: [{transform: [{redact: [outputs.0.outputFacets.outputStatistics]}], to: [a]}]\n"
        "default: {to: [b]}",
        event,
    )
    assert out["outputs"][0]["outputFacets"]["outputStatistics"] == REDACTED


def test_map_namespaces_exact_and_regex_for_datasets_and_jobs_including_parents():
    event = rich_run_event(
        namespace="legacy",
        parent=("legacy", "app", "0176a8c2-fe01-7439-87e6-56a1a1b4029f"),
        root=("legacy", "dag", "0176a8c2-fe01-7439-87e6-56a1a1b40200"),
    )
    event["inputs"].append({"namespace": "s3a://bucket", "name": "k"})
    out, trace = sent(
        r"""
        rules:
          - transform:
              - map_namespaces:
                  datasets:
                    - {from: "s3://raw-bucket", to: "s3://raw"}
                    - {from_regex: "s3a://(.*)", to: "s3://\\1"}
                  jobs:
                    - {from: legacy, to: modern}
            to: [a]
        default: {to: [b]}
        """,
        event,
    )
    assert [d["namespace"] for d in out["inputs"]] == ["s3://raw", "s3://bucket"]
    assert out["outputs"][0]["namespace"] == "hive://metastore:9083"  # no mapping applies
    column_inputs = out["outputs"][0]["facets"]["columnLineage"]["fields"]["amount"]
    assert column_inputs["inputFields"][0]["namespace"] == "s3://raw"
    assert out["job"]["namespace"] == "modern"
    parent = out["run"]["facets"]["parent"]
    assert parent["job"]["namespace"] == "modern"
    assert parent["root"]["job"]["namespace"] == "modern"
    assert trace.transforms[0][2] == 6


def test_map_namespaces_maps_the_names_a_symlinks_facet_gives_a_dataset():
    """Flink names a Kafka topic and its SQL table in one namespace: both are mapped."""
    event = run_event()
    symlinks = {
        "_producer": "https://github.com/OpenLineage/OpenLineage/tree/1.53.0/integration/flink",
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json",
        "identifiers": [{"namespace": "kafka://b2:9092", "name": "db.clicks", "type": "TABLE"}],
    }
    event["outputs"] = [
        {"namespace": "kafka://b2:9092", "name": "t", "facets": {"symlinks": symlinks}}
    ]
    out, trace = sent(
        r"""
        rules:
          - transform: [{map_namespaces: {datasets: [{from: "kafka://b2:9092", to: "kafka://b1:9092"}]}}]
            to: [a]
        default: {to: [b]}
        """,
        event,
    )
    [output] = out["outputs"]
    assert output["namespace"] == "kafka://b1:9092"
    assert output["facets"]["symlinks"]["identifiers"][0]["namespace"] == "kafka://b1:9092"
    assert trace.transforms[0][2] == 2


def test_regex_mapping_is_a_full_match():
    event = run_event()
    event["inputs"] = [{"namespace": "xs3a://b", "name": "n"}]
    out, _ = sent(
        r"""
        rules:
          - transform: [{map_namespaces: {datasets: [{from_regex: "s3a://(.*)", to: "s3://\\1"}]}}]
            to: [a]
        default: {to: [b]}
        """,
        event,
    )
    assert out["inputs"][0]["namespace"] == "xs3a://b"


def test_map_namespace_of_a_dataset_event_and_non_string_namespace():
    event = dataset_event(namespace="kafka://b1:9092")
    body = """
        rules:
          - transform: [{map_namespaces: {datasets: [{from: "kafka://b1:9092", to: kafka://prod}]}}]
            to: [a]
        default: {to: [b]}
    """
    out, _ = sent(body, event)
    assert out["dataset"]["namespace"] == "kafka://prod"
    odd = {"dataset": {"namespace": 7}}
    assert sent(body, odd)[0] == odd


def test_add_tags_creates_the_tags_facet_and_replaces_same_key():
    event = run_event()
    body = """
        rules:
          - transform: [{add_tags: {team: payments, tier: gold}}]
            to: [a]
        default: {to: [b]}
    """
    out, _ = sent(body, event)
    facet = out["job"]["facets"]["tags"]
    assert facet["_producer"] == PRODUCER
    assert facet["_schemaURL"].endswith("TagsJobFacet.json#/$defs/TagsJobFacet")
    assert facet["tags"] == [
        {"key": "team", "value": "payments", "source": "lineage-proxy"},
        {"key": "tier", "value": "gold", "source": "lineage-proxy"},
    ]
    event["job"]["facets"]["tags"] = {
        "_producer": "x",
        "_schemaURL": "y",
        "tags": [{"key": "team", "value": "old"}, {"key": "pii", "value": "true"}],
    }
    again, _ = sent(body, event)
    assert [(t["key"], t["value"]) for t in again["job"]["facets"]["tags"]["tags"]] == [
        ("team", "payments"),
        ("pii", "true"),
        ("tier", "gold"),
    ]


def test_add_tags_on_a_dataset_event_and_unicode():
    out, _ = sent(
        """
        rules:
          - transform: [{add_tags: {équipe: données}}]
            to: [a]
        default: {to: [b]}
        """,
        dataset_event(),
    )
    facet = out["dataset"]["facets"]["tags"]
    assert facet["_schemaURL"].endswith("TagsDatasetFacet.json#/$defs/TagsDatasetFacet")
    assert facet["tags"][0]["key"] == "équipe" and facet["tags"][0]["value"] == "données"


def test_transforms_of_continued_rules_accumulate_in_order():
    event = rich_run_event()
    out, trace = sent(
        """
        rules:
          - name: first
            transform: [{redact: [job.facets.sql.query]}]
            continue: true
          - name: second
            match: {fields: {job.facets.sql.query: "***REDACTED***"}}
            transform: [{drop_facets: [sql]}]
            to: [a]
        default: {to: [b]}
        """,
        event,
    )
    assert trace.matched == ["first", "second"]
    assert "sql" not in out["job"]["facets"]


def test_repaired_event_keeps_its_repairs_through_a_transform_copy():
    repair = Repair("naive_date_time", "/eventTime", "2026-11-23T10:00:00", "2026-11-23T10:00:00Z")
    event = RepairedEvent(rich_run_event(), (repair,))
    router = RulesRouter(  # destinations are plain names here; the router passes them on
        ruleset(  # type: ignore[arg-type]
            """
            rules:
              - name: redact
                match: {kind: run}
                transform: [{redact: [job.facets.sql.query]}]
                to: [a]
            default: {to: [b]}
            """
        )
    )

    route = router.route(event)

    assert route.event is not event  # transforms work on a copy
    assert route.event["job"]["facets"]["sql"]["query"] != event["job"]["facets"]["sql"]["query"]
    assert dict(event_headers(route.event))["ol_repairs"] == event.header_value()
