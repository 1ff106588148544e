"""Rule order, continue, drop, default, throttle, counters and the namespace index."""

from __future__ import annotations

from routing_rules.ruleset import Trace
from routing_rules.stats import DEFAULT_RULE, RoutingStats
from tests.support.sample_events import dataset_event, job_event, rich_run_event, run_event
from tests.unit.routing_rules.helpers import ruleset


def test_first_match_wins():
    rules = ruleset(
        """
        rules:
          - {name: one, match: {job_namespace: team-*}, to: [a]}
          - {name: two, match: {job_namespace: team-a}, to: [b]}
        default: {to: [c]}
        """
    )
    assert list(rules.route(run_event(namespace="team-a")).destinations) == ["a"]


def test_continue_collects_destinations_in_order_without_repeats():
    rules = ruleset(
        """
        rules:
          - {name: one, to: [b, a], continue: true}
          - {name: two, match: {kind: job}, to: [c]}
          - {name: three, to: [a, c]}
          - {name: never, to: [b]}
        default: {to: [c]}
        """
    )
    trace = Trace()
    route = rules.route(run_event(), trace)
    assert list(route.destinations) == ["b", "a", "c"]
    assert trace.matched == ["one", "three"]
    assert not trace.defaulted


def test_drop_sends_nowhere_even_after_continued_rules():
    stats = RoutingStats()
    rules = ruleset(
        """
        rules:
          - {name: all, to: [a], continue: true}
          - {name: no-running, match: {event_type: RUNNING}, drop: true}
        default: {to: [c]}
        """,
        stats,
    )
    route = rules.route(run_event(event_type="RUNNING"))
    assert route.destinations == () and route.dropped_by == "no-running"
    assert list(rules.route(run_event(event_type="START")).destinations) == ["a"]
    assert stats.snapshot()["no-running"] == {"matched": 1, "dropped": 1, "throttled": 0}
    assert stats.snapshot()["all"]["matched"] == 2


def test_default_catches_what_no_rule_sends_anywhere():
    stats = RoutingStats()
    rules = ruleset(
        """
        rules:
          - {name: tag-only, transform: [{add_tags: {x: y}}], continue: true}
          - {name: team-b, match: {job_namespace: team-b}, to: [b]}
        default: {to: [c]}
        """,
        stats,
    )
    trace = Trace()
    route = rules.route(run_event(namespace="team-a"), trace)
    assert list(route.destinations) == ["c"] and trace.defaulted
    assert route.event["job"]["facets"]["tags"]["tags"][0]["key"] == "x"
    assert stats.snapshot()[DEFAULT_RULE] == {"matched": 1, "dropped": 0, "throttled": 0}


def test_default_drop_is_counted_and_named():
    stats = RoutingStats()
    rules = ruleset("rules: [{match: {kind: run}, to: [a]}]\ndefault: {drop: true}", stats)
    route = rules.route(job_event())
    assert route.destinations == () and route.dropped_by == DEFAULT_RULE
    assert stats.snapshot()[DEFAULT_RULE] == {"matched": 1, "dropped": 1, "throttled": 0}


def test_unnamed_rules_are_counted_by_position():
    stats = RoutingStats()
    rules = ruleset("rules: [{match: {kind: job}, to: [a]}, {to: [b]}]\ndefault: {to: [c]}", stats)
    rules.route(run_event())
    assert stats.snapshot()["rule-2"]["matched"] == 1
    assert stats.snapshot()["rule-1"]["matched"] == 0


def test_throttle_keeps_one_running_event_per_run_per_interval():
    now = [1000.0]
    stats = RoutingStats()
    rules = ruleset(
        """
        rules:
          - name: stream
            match: {producer: "*"}
            throttle: {interval_seconds: 60}
            to: [a]
        default: {to: [c]}
        """,
        stats,
        clock=lambda: now[0],
    )
    run_a = "0176a8c2-fe01-7439-87e6-56a1a1b4029f"
    run_b = "0176a8c2-fe01-7439-87e6-56a1a1b40200"

    def passes(event_type: str, run_id: str) -> bool:
        return bool(rules.route(run_event(event_type=event_type, run_id=run_id)).destinations)

    assert passes("START", run_a)
    assert passes("RUNNING", run_a)
    assert not passes("RUNNING", run_a)
    assert passes("RUNNING", run_b)  # another run has its own budget
    now[0] += 59.9
    assert not passes("RUNNING", run_a)
    now[0] += 0.2
    assert passes("RUNNING", run_a)
    assert not passes("RUNNING", run_a)
    assert passes("COMPLETE", run_a)  # terminal events always pass ...
    assert passes("RUNNING", run_a)  # ... and forget the run
    assert stats.snapshot()["stream"]["throttled"] == 3
    throttled = rules.route(run_event(event_type="RUNNING", run_id=run_a))
    assert throttled.dropped_by == "stream (throttle)"


def test_a_throttled_event_still_reaches_what_earlier_rules_collected():
    """A streaming job's every RUNNING event to one destination (a: Kafka), one per run
    per interval to another (b: the archive): a throttle keeps the event from its own
    rule's destinations only."""
    stats = RoutingStats()
    rules = ruleset(
        """
        rules:
          - {name: everything, to: [a], continue: true}
          - name: streaming
            match: {producer: "*flink*"}
            throttle: {interval_seconds: 60}
            to: [b]
          - {name: never, to: [c]}
        default: {to: [c]}
        """,
        stats,
        clock=lambda: 1000.0,
    )
    run_id = "0176a8c2-fe01-7439-87e6-56a1a1b4029f"
    events = [run_event(event_type=t, run_id=run_id) for t in ("START", *["RUNNING"] * 3)]
    for event in events:
        event["producer"] = "https://github.com/OpenLineage/OpenLineage/tree/1.53.0/flink"
    routes = [rules.route(event) for event in events]
    assert [list(r.destinations) for r in routes] == [
        ["a", "b"],
        ["a", "b"],
        ["a"],
        ["a"],
    ]
    assert [r.dropped_by for r in routes] == [None] * 4
    assert stats.snapshot()["streaming"]["throttled"] == 2
    assert stats.snapshot()["never"]["matched"] == 0


def test_throttle_forgets_least_recently_seen_runs_beyond_max_runs():
    rules = ruleset(
        """
        rules:
          - {throttle: {interval_seconds: 60, max_runs: 2}, to: [a]}
        default: {to: [c]}
        """,
        clock=lambda: 0.0,
    )
    ids = [f"0176a8c2-fe01-7439-87e6-56a1a1b4020{i}" for i in range(3)]
    for run_id in ids:
        assert rules.route(run_event(event_type="RUNNING", run_id=run_id)).destinations
    throttle = rules.rules[0].throttle
    assert throttle is not None and len(throttle) == 2
    # The first run was forgotten, so its next RUNNING event passes again.
    assert rules.route(run_event(event_type="RUNNING", run_id=ids[0])).destinations
    assert not rules.route(run_event(event_type="RUNNING", run_id=ids[2])).destinations


def test_throttle_ignores_events_without_a_run():
    rules = ruleset(
        "rules: [{throttle: {interval_seconds: 60}, to: [a]}]\ndefault: {to: [c]}",
        clock=lambda: 0.0,
    )
    for _ in range(3):
        assert rules.route(job_event()).destinations == ("a",)


def test_namespace_index_gives_the_same_answers_as_plain_order():
    rules = ruleset(
        """
        rules:
          - {name: r1, match: {job_namespace: "team-*", event_type: COMPLETE}, to: [a]}
          - {name: r2, match: {kind: dataset}, to: [b]}
          - {name: r3, match: {job_namespace: {regex: "^team-b$"}}, to: [b]}
          - {name: r4, match: {job_namespace: [x, y]}, to: [c]}
          - {name: r5, match: {event_type: START}, to: [c]}
        default: {to: [a]}
        """
    )
    cases = [
        (run_event(namespace="team-a", event_type="COMPLETE"), ["a"]),
        (run_event(namespace="team-b", event_type="START"), ["b"]),
        (run_event(namespace="x", event_type="RUNNING"), ["c"]),
        (run_event(namespace="z", event_type="START"), ["c"]),
        (run_event(namespace="z", event_type="RUNNING"), ["a"]),
        (dataset_event(), ["b"]),
    ]
    for _ in range(2):  # the second pass is served from the namespace memo
        for event, expected in cases:
            assert list(rules.route(event).destinations) == expected, event["eventTime"]


def test_rules_after_a_namespace_mapping_see_the_new_namespace():
    rules = ruleset(
        """
        rules:
          - name: align
            transform: [{map_namespaces: {jobs: [{from: legacy, to: team-a}]}}]
            continue: true
          - {name: legacy, match: {job_namespace: legacy}, to: [b]}
          - {name: team-a, match: {job_namespace: team-a}, to: [a]}
        default: {to: [c]}
        """
    )
    trace = Trace()
    route = rules.route(run_event(namespace="legacy"), trace)
    assert list(route.destinations) == ["a"]
    assert trace.matched == ["align", "team-a"]
    assert route.event["job"]["namespace"] == "team-a"


def test_destinations_lists_every_reachable_destination_once():
    rules = ruleset("rules: [{to: [b, a]}]\ndefault: {to: [a, c]}\nrejected: {to: [c]}")
    assert rules.destinations == ("b", "a", "c")
    assert rules.rejected == ("c",)


def test_stats_are_exposed_to_prometheus():
    from prometheus_client import CollectorRegistry, generate_latest

    stats = RoutingStats()
    registry = CollectorRegistry()
    registry.register(stats)
    rules = ruleset("rules: [{name: all, to: [a]}]\ndefault: {to: [c]}", stats)
    rules.route(run_event())
    stats.count_reload("failure")
    text = generate_latest(registry).decode()
    assert 'lineage_proxy_routed_events_total{outcome="matched",rule="all"} 1.0' in text
    assert 'lineage_proxy_rules_reloads_total{result="failure"} 1.0' in text


def test_index_covers_job_name_producer_kind_and_event_type():
    rules = ruleset(
        """
        rules:
          - {name: r1, match: {job_name: "etl.*", producer: "*spark*"}, to: [a]}
          - {name: r2, match: {kind: [job], job_name: etl.daily}, to: [b]}
          - {name: r3, match: {event_type: [COMPLETE, FAIL], fields: {run.facets.x: 1}}, to: [c]}
          - {name: r4, match: {event_type: COMPLETE}, to: [b]}
        default: {to: [c]}
        """
    )
    spark = run_event(name="etl.daily", event_type="COMPLETE")
    spark["producer"] = "https://github.com/OpenLineage/OpenLineage/integration/spark"
    plain = run_event(name="etl.daily", event_type="COMPLETE")
    with_x = run_event(name="load", event_type="FAIL")
    with_x["run"]["facets"]["x"] = 1
    for _ in range(2):
        assert list(rules.route(spark).destinations) == ["a"]
        assert list(rules.route(plain).destinations) == ["b"]
        assert list(rules.route(job_event(name="etl.daily")).destinations) == ["b"]
        assert list(rules.route(with_x).destinations) == ["c"]
        assert list(rules.route(run_event(name="load", event_type="START")).destinations) == ["c"]


def test_values_that_are_not_hashable_do_not_break_routing():
    rules = ruleset(
        "rules: [{match: {event_type: START}, to: [a]}, {match: {job_name: x}, to: [b]}]\n"
        "default: {to: [c]}"
    )
    odd = run_event()
    odd["eventType"] = ["START"]
    odd["job"]["name"] = {"x": 1}
    assert list(rules.route(odd).destinations) == ["c"]


def test_a_transform_that_changes_a_key_value_re_indexes_later_rules():
    rules = ruleset(
        """
        rules:
          - {name: hide, transform: [{redact: [producer]}], continue: true}
          - {name: spark, match: {producer: "*spark*"}, to: [a]}
          - {name: hidden, match: {producer: "***REDACTED***"}, to: [b]}
        default: {to: [c]}
        """
    )
    event = run_event()
    event["producer"] = "https://example.com/spark"
    assert list(rules.route(event).destinations) == ["b"]


def test_field_equalities_in_the_index_keep_json_types_apart():
    rules = ruleset(
        """
        rules:
          - {name: flag-true, match: {fields: {run.facets.f.v: true}}, to: [a]}
          - {name: one, match: {fields: {run.facets.f.v: 1}}, to: [b]}
          - {name: null, match: {fields: {run.facets.f.v: null}}, to: [c]}
          - {name: text, match: {fields: {run.facets.f.v: "1", job.name: etl.daily}}, to: [a, b]}
        default: {to: [a, c]}
        """
    )

    def routed(value: object) -> list[str]:
        event = run_event(name="etl.daily")
        if value != "missing":
            event["run"]["facets"]["f"] = {"v": value}
        return list(rules.route(event).destinations)

    for _ in range(2):  # second pass: from the memo
        assert routed(True) == ["a"]
        assert routed(1) == ["b"]
        assert routed(1.0) == ["b"]
        assert routed(None) == ["c"]
        assert routed("1") == ["a", "b"]
        assert routed("missing") == ["a", "c"]
        assert routed([1]) == ["a", "c"]  # not hashable: the index steps aside
        assert routed(False) == ["a", "c"]


def test_redacting_an_indexed_field_re_keys_later_rules():
    rules = ruleset(
        """
        rules:
          - name: hide
            transform: [{redact: [run.facets.processing_engine.name]}]
            continue: true
          - {name: spark, match: {fields: {run.facets.processing_engine.name: spark}}, to: [a]}
          - name: hidden
            match: {fields: {run.facets.processing_engine.name: "***REDACTED***"}}
            to: [b]
        default: {to: [c]}
        """
    )
    assert list(rules.route(rich_run_event()).destinations) == ["b"]
