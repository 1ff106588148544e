"""Metrics an operator reads first: what runs (build_info), whether the rules file last
loaded, and the in-process consumers on the proxy's own /metrics."""

from __future__ import annotations

import platform
import time

from prometheus_client.parser import text_string_to_metric_families

from consumers.metrics import ConsumerMetrics, DaemonsCollector
from proxy import __version__
from proxy.metrics.process import ProxyMetrics
from routing_rules.stats import RoutingStats

Series = tuple[str, frozenset[tuple[str, str]]]


def _samples(exposition: bytes) -> dict[Series, float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(exposition.decode())
        for sample in family.samples
    }


def test_build_info_names_the_version_and_python():
    metrics = ProxyMetrics()
    info = [
        labels
        for (name, labels), value in _samples(metrics.exposition()).items()
        if name == "lineage_proxy_build_info" and value == 1
    ]
    assert len(info) == 1
    labels = dict(info[0])
    assert labels["version"] == __version__
    assert labels["python"] == platform.python_version()
    assert labels["librdkafka"] and labels["aiohttp"]


def test_last_reload_gauges_follow_the_last_load_and_appear_only_after_one():
    metrics = ProxyMetrics()
    stats = RoutingStats()
    metrics.registry.register(stats)
    success: Series = ("lineage_proxy_rules_last_reload_success", frozenset())
    when: Series = ("lineage_proxy_rules_last_reload_timestamp_seconds", frozenset())
    assert success not in _samples(metrics.exposition())
    before = time.time()
    stats.loaded(True)  # the load at start
    assert _samples(metrics.exposition())[success] == 1
    stats.count_reload("failure")
    samples = _samples(metrics.exposition())
    assert samples[success] == 0 and samples[when] >= before
    assert samples[("lineage_proxy_rules_reloads_total", frozenset({("result", "failure")}))] == 1
    stats.count_reload("success")
    assert _samples(metrics.exposition())[success] == 1


def test_several_daemons_show_side_by_side_in_the_proxy_registry():
    metrics = ProxyMetrics()
    first, second = ConsumerMetrics("to-marquez"), ConsumerMetrics("to-archive")
    first.delivered.inc(3)
    second.delivered.inc(5)
    second.set_lag("events", 2, 17)
    second.circuit_open.set(1)
    second.dead_lettered.labels("to-archive", "refused").inc()
    collector = DaemonsCollector([first, second])
    metrics.registry.register(collector)
    samples = _samples(metrics.exposition())
    delivered = "lineage_consumer_delivered_total"
    assert samples[(delivered, frozenset({("consumer", "to-marquez")}))] == 3
    assert samples[(delivered, frozenset({("consumer", "to-archive")}))] == 5
    lag = {("consumer", "to-archive"), ("topic", "events"), ("partition", "2")}
    assert samples[("lineage_consumer_lag", frozenset(lag))] == 17
    assert samples[("lineage_consumer_circuit_open", frozenset({("consumer", "to-archive")}))] == 1
    dead = {("consumer", "to-archive"), ("why", "refused")}
    assert samples[("lineage_consumer_dead_lettered_total", frozenset(dead))] == 1
    assert ("lineage_proxy_http_requests_total", frozenset()) not in samples  # proxy intact
    metrics.registry.unregister(collector)
    assert not any(n.startswith("lineage_consumer") for n, _ in _samples(metrics.exposition()))
