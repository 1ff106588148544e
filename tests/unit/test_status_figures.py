"""Per-minute figures from counters, latency quantiles, consumers' figures, the rejection
ring and the tap's filters and queues: pure, no server."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram

from consumers.config import ConsumerConfig
from consumers.daemon import ConsumerDaemon
from consumers.metrics import ConsumerMetrics
from proxy.auth.principal import Principal
from proxy.tap.hub import TapFilter, TapHub
from proxy.web.rejections import RecentRejections
from proxy.web.status.rates import RateWindow, Reading, read_registry
from proxy.web.status.report import _consumers, _quantile
from routing_rules.ruleset import Route, Trace
from tests.support.sample_events import dataset_event, run_event


def counter_registry() -> tuple[CollectorRegistry, Counter]:
    registry = CollectorRegistry()
    return registry, Counter("events", "test", ["kind"], registry=registry)


def test_per_minute_is_growth_over_the_last_minute_not_since_start():
    registry, events = counter_registry()
    window = RateWindow(registry, window=60, every=5)
    events.labels("run").inc(100)  # long ago
    window.sample(at=0)
    for second in range(5, 120, 5):
        if second > 60:
            events.labels("run").inc(1)  # one event every 5 s during the last minute
        window.sample(at=second)
    now, growth, seconds = window.now_and_growth(at=120)
    assert now.total("events_total") == 100 + 11
    assert seconds == 60
    assert growth.total("events_total") * 60 / seconds == 11  # all since t=65, none before


def test_during_the_first_minute_per_minute_is_the_events_so_far():
    registry, events = counter_registry()
    window = RateWindow(registry)
    window.sample(at=0)
    events.labels("job").inc(3)
    events.labels("run").inc(4)
    _, growth, seconds = window.now_and_growth(at=10)
    assert (growth.total("events_total"), seconds) == (7, 60)
    assert growth.total("events_total", kind="job") == 3


def latency_reading(*seconds: float) -> Reading:
    """A registry reading of the delivery histogram (destination ``kafka``)."""
    registry = CollectorRegistry()
    latency = Histogram(
        "lineage_proxy_delivery_seconds",
        "t",
        ["destination"],
        buckets=(0.01, 0.1, 1),
        registry=registry,
    )
    for value in seconds:
        latency.labels("kafka").observe(value)
    return read_registry(registry)


def test_p99_is_interpolated_within_the_bucket_like_prometheus():
    reading = latency_reading(*[0.005] * 90, *[0.05] * 10)
    # Rank 99 of 100 is the 9th of 10 in (0.01, 0.1]: 0.01 + 0.09 * 9/10.
    assert _quantile(reading, "kafka", 0.99) == pytest.approx(0.091, abs=1e-9)
    assert _quantile(reading, "archive", 0.99) is None


def test_in_process_consumers_show_lag_and_circuit_from_their_registered_metrics():
    registry = CollectorRegistry()
    marquez = ConsumerMetrics("marquez")
    registry.register(marquez.registry)
    marquez.set_lag("openlineage.events", 0, 7)
    marquez.set_lag("openlineage.events", 1, 5)
    marquez.circuit_open.set(1)
    marquez.assigned_partitions.set(2)
    reading = read_registry(registry)
    assert _consumers(reading, reading, 1.0) == [
        {
            "name": "marquez",
            "state": "target down",
            "assigned_partitions": 2,
            "lag": 12,
            "circuit_open": True,
            "delivered_per_minute": 0,
        }
    ]


def test_a_consumer_that_lost_its_partitions_says_so_and_shows_no_lag():
    """Kafka frozen: the group dropped the consumer — "closed, lag 0" would be a lie."""
    registry = CollectorRegistry()
    archive = ConsumerMetrics("archive")
    registry.register(archive.registry)
    archive.assigned_partitions.set(0)
    reading = read_registry(registry)
    [shown] = _consumers(reading, reading, 1.0)
    assert (shown["state"], shown["lag"], shown["assigned_partitions"]) == (
        "no partitions",
        None,
        0,
    )
    archive.kafka_unreachable.set(1)
    reading = read_registry(registry)
    assert _consumers(reading, reading, 1.0)[0]["state"] == "kafka unreachable"


def test_a_consumer_whose_partitions_are_lost_shows_it_on_the_status_page() -> None:
    """The daemon's own rebalance callbacks (as librdkafka calls them when the group drops
    a member, e.g. with Kafka frozen) drive what the page says, not a gauge set by hand."""
    config = ConsumerConfig.model_validate(
        {"target": {"kind": "http", "url": "http://127.0.0.1:9/x"}}
    )
    daemon = ConsumerDaemon("archive", config, bootstrap_servers="127.0.0.1:9", default_topic="e")
    registry = CollectorRegistry()
    registry.register(daemon.metrics.registry)
    daemon.assigned([("e", 0), ("e", 1)], {}, {})
    reading = read_registry(registry)
    [shown] = _consumers(reading, reading, 1.0)
    assert (shown["state"], shown["assigned_partitions"]) == ("consuming", 2)
    daemon.lost([("e", 0), ("e", 1)])
    reading = read_registry(registry)
    [shown] = _consumers(reading, reading, 1.0)
    assert (shown["state"], shown["lag"], shown["assigned_partitions"]) == (
        "no partitions",
        None,
        0,
    )


def test_rejection_ring_keeps_the_newest_and_no_payload():
    recent = RecentRejections(size=3)
    for index in range(5):
        recent.add(400, "invalid", f"event {index}", [f"/{index}/run/runId"])
    assert [r.error for r in recent.newest_first()] == ["event 4", "event 3", "event 2"]
    assert set(recent.newest_first()[0].as_json()) == {
        "time",
        "status",
        "reason",
        "error",
        "pointers",
        "request_id",
        "client",
        "producer",
        "job",
        "messages",
    }


def publish(hub: TapHub, event: dict, rules: list[str]) -> None:
    hub.publish(event, Route(event, ()), Trace(matched=rules))


def test_tap_filters_and_scopes_what_a_subscriber_sees():
    hub = TapHub()
    team_a = Principal("team-a", ("team-a*",), ("s3://a*",))
    everyone = Principal("admin", ("*",), ("*",))
    assert not hub.listening
    with (
        hub.subscribe(TapFilter(), team_a) as scoped,
        hub.subscribe(TapFilter(rule="r1", event_type="complete"), everyone) as by_rule,
        hub.subscribe(TapFilter(namespace="s3://*", job="path/*"), everyone) as datasets,
    ):
        assert hub.listening
        publish(hub, run_event(namespace="team-a", event_type="COMPLETE"), ["r1"])
        publish(hub, run_event(namespace="team-b", event_type="COMPLETE"), ["r1"])
        publish(hub, run_event(namespace="team-a", event_type="START"), ["r1"])
        publish(hub, dataset_event("s3://a-bucket", "path/x"), [])
        assert [(t.namespace, t.event_type) for t in drain(scoped)] == [
            ("team-a", "COMPLETE"),
            ("team-a", "START"),
            ("s3://a-bucket", None),
        ]
        assert [t.namespace for t in drain(by_rule)] == ["team-a", "team-b"]
        assert [t.name for t in drain(datasets)] == ["path/x"]
    assert not hub.listening


def test_a_full_subscriber_queue_drops_and_counts_instead_of_waiting():
    hub = TapHub(queue_size=2)
    with hub.subscribe(TapFilter(), Principal("admin", ("*",), ("*",))) as slow:
        for _ in range(5):
            publish(hub, run_event(), [])
        assert (slow.queue.qsize(), slow.dropped, hub.dropped_total) == (2, 3, 3)
        hub.close()
        assert [t is None for t in drain(slow)] == [False, True]


def drain(subscription) -> list:
    items = []
    while not subscription.queue.empty():
        items.append(subscription.queue.get_nowait())
    return items
