"""The example rules files do what their comments say (they are also loaded in
test_loader.py, so none can rot unnoticed)."""

from __future__ import annotations

import uuid
from pathlib import Path

from routing_rules.compiler import compile_rules
from routing_rules.loader import load_rules_file
from routing_rules.ruleset import Ruleset
from routing_rules.stats import RoutingStats
from routing_rules.transforms import REDACTED
from tests.support.paths import REPO
from tests.support.sample_events import dataset_event, job_event, rich_run_event, run_event

EXAMPLES = REPO / "routing_rules" / "examples"


def example(name: str) -> Ruleset[str]:
    rules = load_rules_file(EXAMPLES / f"{name}.yaml")
    return compile_rules(rules, lambda destination: destination, RoutingStats(), clock=lambda: 0)


def destinations(rules: Ruleset[str], event: dict) -> list[str]:
    return list(rules.route(event).destinations)


def test_per_team_topics():
    rules = example("per-team-topics")
    assert destinations(rules, run_event(namespace="payments")) == ["payments"]
    assert destinations(rules, run_event(namespace="marketing-eu")) == ["marketing"]
    assert destinations(rules, run_event(namespace="dp-core")) == ["shared"]
    assert destinations(rules, run_event(namespace="sales")) == ["shared"]
    assert destinations(rules, dataset_event()) == ["shared"]


def test_drop_running():
    rules = example("drop-running")
    flink = run_event(event_type="RUNNING", run_id="0176a8c2-fe01-7439-87e6-56a1a1b4029f")
    flink["producer"] = "https://github.com/apache/flink/tree/1.19"
    assert destinations(rules, flink) == ["kafka"]
    assert destinations(rules, flink) == []  # throttled
    assert destinations(rules, run_event(event_type="RUNNING")) == []  # dropped
    assert destinations(rules, run_event(event_type="COMPLETE")) == ["kafka"]


def test_redact_sql():
    event = rich_run_event()
    event["run"]["facets"]["spark_properties"] = {"_producer": "p", "_schemaURL": "s"}
    route = example("redact-sql").route(event)
    assert list(route.destinations) == ["kafka"]
    assert route.event["job"]["facets"]["sql"]["query"] == REDACTED
    assert "spark_properties" not in route.event["run"]["facets"]


def test_archive_everything():
    rules = example("archive-everything")
    assert destinations(rules, run_event()) == ["kafka", "archive"]
    assert rules.rejected == ("invalid",)


def test_spark_to_marquez():
    rules = example("spark-to-marquez")
    assert destinations(rules, rich_run_event()) == ["kafka", "marquez"]  # processing_engine
    assert destinations(rules, run_event()) == ["kafka"]


def test_namespace_alignment():
    event = rich_run_event(namespace="analytics-legacy")
    event["inputs"][0]["namespace"] = "kafka://broker1.internal:9092,broker2.internal:9092"
    event["outputs"][0]["namespace"] = "s3a://lake"
    route = example("namespace-alignment").route(event)
    assert list(route.destinations) == ["analytics"]
    assert route.event["job"]["namespace"] == "analytics"
    assert route.event["inputs"][0]["namespace"] == "kafka://prod-cluster"
    assert route.event["outputs"][0]["namespace"] == "s3://lake"
    assert route.event["job"]["facets"]["tags"]["tags"][0]["key"] == "aligned-by"


def test_data_rentgen():
    rules = example("data-rentgen")
    v7 = run_event(run_id="0196a8c2-fe01-7439-87e6-56a1a1b4029f")
    assert destinations(rules, v7) == ["kafka", "data-rentgen"]
    assert destinations(rules, run_event(run_id=str(uuid.uuid4()))) == ["kafka"]  # v4
    assert destinations(rules, job_event()) == ["kafka"]
    assert destinations(rules, dataset_event()) == ["kafka"]
    assert rules.rejected == ("rejected",)


def test_kafka_streaming():
    """The same topic named by two producers, by hostname and by a list of addresses, is
    one dataset; a Flink run's RUNNING events all reach Kafka, one the archive (its cases
    file, run in test_rules_cli.py, says the rest)."""
    rules = example("kafka-streaming")
    flink = run_event(event_type="START")
    flink["producer"] = "https://github.com/OpenLineage/OpenLineage/tree/1.53.0/integration/flink"
    flink["inputs"] = [{"namespace": "kafka://broker2.internal:9092", "name": "clicks"}]
    spark = run_event(event_type="START")
    spark["outputs"] = [{"namespace": "kafka://10.0.0.13:9092,broker1:9092", "name": "clicks"}]
    aligned = [rules.route(e).event for e in (flink, spark)]
    assert {aligned[0]["inputs"][0]["namespace"], aligned[1]["outputs"][0]["namespace"]} == {
        "kafka://broker1:9092"
    }
    running = {**flink, "eventType": "RUNNING"}
    assert [destinations(rules, running) for _ in range(3)] == [
        ["kafka", "archive"],
        ["kafka"],
        ["kafka"],
    ]


def test_every_example_is_tested_here():
    tested = {
        name.removeprefix("test_").replace("_", "-")
        for name in globals()
        if name.startswith("test_") and name != "test_every_example_is_tested_here"
    }
    # *.cases.yaml are rules unit tests, run in test_rules_cli.py.
    rules = {p.stem for p in Path(EXAMPLES).glob("*.yaml") if not p.stem.endswith(".cases")}
    assert rules == tested
