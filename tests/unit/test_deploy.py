"""deploy/: the Prometheus alerts and the Grafana dashboard (the Helm chart is
tests/unit/test_chart.py, rendered by the real helm).

The alerts are checked by the real `promtool` (`check rules`, and `test rules` with
deploy/prometheus/lineage-proxy-alerts.test.yaml, which makes a crashed consumer, a spool
near its limit, a stalled consumer... fire). Both may use only metric names the code
exports (collected from the registries the proxy and the consumer daemons create).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from consumers.metrics import ConsumerMetrics
from proxy.destinations.kafka.spool_drainer import SpoolMetrics
from proxy.destinations.kafka.stranded import StrandedSpool
from proxy.metrics.disk_space import DiskSpace
from proxy.metrics.process import KafkaReachability, ProxyMetrics
from routing_rules.stats import RoutingStats
from tests.support.deploy_tools import run_tool
from tests.support.paths import REPO

DEPLOY = REPO / "deploy"
DASHBOARD = DEPLOY / "grafana" / "lineage-proxy-dashboard.json"
ALERTS = DEPLOY / "prometheus" / "lineage-proxy-alerts.yaml"
ALERT_TESTS = DEPLOY / "prometheus" / "lineage-proxy-alerts.test.yaml"
RUNBOOKS = REPO / "docs" / "operate" / "runbooks.md"

_SERIES_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
}
# Series Prometheus itself makes: scrape health and the alerts' state.
_PROMETHEUS_SERIES = {"up", "ALERTS"}


class _ProducerDouble:
    """Enough of a KafkaProducer for KafkaReachability to list its gauge."""

    settings: dict[str, object] = {"bootstrap.servers": "kafka:9092"}
    delivering = True


def exported_series() -> set[str]:
    """Every series name /metrics of the proxy or of a consumer daemon can show."""
    proxy = ProxyMetrics()
    stats = RoutingStats()
    stats.loaded(True)  # as proxy/web/app.py registers it and the rules' first load marks it
    proxy.registry.register(stats)
    proxy.registry.register(SpoolMetrics(list))
    proxy.registry.register(KafkaReachability(lambda: [_ProducerDouble()]))
    proxy.registry.register(DiskSpace({}))
    proxy.registry.register(StrandedSpool())
    names = set()
    for registry in (proxy.registry, ConsumerMetrics("any").registry):
        for family in registry.collect():
            names |= {family.name + suffix for suffix in _SERIES_SUFFIXES[family.type]}
    return names


def _metric_names(promql: str) -> set[str]:
    return set(re.findall(r"\blineage_[a-z0-9_]+", promql))


def _alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _rule(name: str) -> dict[str, Any]:
    (rule,) = [r for r in _alert_rules() if r["alert"] == name]
    return rule


def _dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def _dashboard_exprs() -> list[str]:
    return [t["expr"] for p in _dashboard()["panels"] for t in p.get("targets", [])]


@pytest.mark.parametrize("source", ["alerts", "dashboard"])
def test_alerts_and_dashboard_use_only_metrics_the_code_exports(source):
    exprs = [r["expr"] for r in _alert_rules()] if source == "alerts" else _dashboard_exprs()
    assert exprs
    known = exported_series()
    assert "lineage_consumer_lag" in known, "collecting the registries is broken"
    assert {"lineage_proxy_kafka_reachable", "lineage_proxy_spool_max_bytes"} <= known
    for expr in exprs:
        names = _metric_names(expr)
        assert names or set(re.findall(r"\b(up|ALERTS)\{", expr)), f"no metric in {expr!r}"
        assert names <= known, f"unknown metrics {names - known} in {expr!r}"


# --- alerts -----------------------------------------------------------------------------


def test_promtool_checks_the_rules_and_their_unit_tests_pass():
    run_tool("promtool", "check", "rules", ALERTS)
    done = run_tool("promtool", "test", "rules", ALERT_TESTS)
    assert "SUCCESS" in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("alert", "old", "new"),
    [
        # A spool alert on a fixed 1 GB threshold, as before the limit was exported.
        (
            "LineageProxySpoolFillingUp",
            "lineage_proxy_spool_bytes / lineage_proxy_spool_max_bytes\n          ) > 0.8",
            "lineage_proxy_spool_bytes\n          ) > 1e9",
        ),
        # A disk alert that waits for the last 1%: a disk with 5% left is not seen.
        (
            "LineageProxyDiskFillingUp",
            "lineage_proxy_disk_size_bytes\n          ) < 0.1",
            "lineage_proxy_disk_size_bytes\n          ) < 0.01",
        ),
        # The stranded record summed over workers and pods: the pod is no longer named.
        (
            "LineageProxySpoolStranded",
            "max by (namespace, instance) (lineage_proxy_spool_stranded_events)",
            "max by (namespace) (lineage_proxy_spool_stranded_events)",
        ),
    ],
)
def test_promtool_unit_tests_can_fail(alert: str, old: str, new: str, tmp_path):
    """The unit tests above see the rules: each mutation fails them. (The disk and
    stranded-spool tests were also run against the alerts before those rules existed:
    they failed, the alerts absent.)"""
    broken = ALERTS.read_text().replace(old, new)
    assert broken != ALERTS.read_text()
    (tmp_path / ALERTS.name).write_text(broken)
    (tmp_path / ALERT_TESTS.name).write_text(ALERT_TESTS.read_text())
    done = run_tool("promtool", "test", "rules", tmp_path / ALERT_TESTS.name, check=False)
    assert done.returncode == 1
    assert alert in done.stdout + done.stderr


def test_every_alert_links_a_runbook_section_that_exists():
    anchors = {
        re.sub(r"[^a-z0-9-]", "", heading.strip().lower().replace(" ", "-"))
        for heading in re.findall(r"^#{2,3} (.+)$", RUNBOOKS.read_text(), re.M)
    }
    rules = _alert_rules()
    assert len(rules) >= 15
    for rule in rules:
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]
        url = rule["annotations"]["runbook_url"]
        page, anchor = url.split("#")
        assert page == "docs/operate/runbooks.md" and anchor == rule["alert"].lower(), url
        assert anchor in anchors, f"{url}: no such section in docs/operate/runbooks.md"


def _runbook(alert: str) -> str:
    sections = re.split(r"^## ", RUNBOOKS.read_text(), flags=re.M)
    (section,) = [s for s in sections if s.startswith(f"{alert}\n")]
    return section


def test_the_stranded_spool_runbook_names_both_ways_out():
    """Scaling back up is one way; a drain by hand from a pod that mounts the claim is the
    other, for a scale-in nobody wants to undo. Seen failing on the old runbook (scale
    back up only)."""
    section = _runbook("LineageProxySpoolStranded")
    assert "scale back up" in section.lower()
    assert "lineage-proxy spool drain" in section
    assert "stranded.json" in section and "persistentVolumeClaim" in section
    # The disk alerts' runbooks name the archive as the usual cause, and what replaces it.
    assert "object_archive" in _runbook("LineageProxyDiskFillingUp")
    assert "LineageProxyDiskFillingUp" in _runbook("LineageProxyDiskFullWithinADay")


def test_alerts_see_a_target_that_is_down_or_gone():
    exprs = {r["alert"]: r["expr"] for r in _alert_rules()}
    assert exprs["LineageProxyDown"].strip() == 'up{job="lineage-proxy"} == 0'
    assert exprs["LineageConsumerDown"].strip() == 'up{job="lineage-consumer"} == 0'
    assert exprs["LineageProxyAbsent"].strip() == 'absent(up{job="lineage-proxy"})'
    # A crashed consumer's lag series vanish: the rule compares with an hour ago.
    assert "offset 1h" in exprs["LineageConsumerVanished"]


def test_spool_and_lag_alerts_are_relative_not_fixed_thresholds():
    spool = _rule("LineageProxySpoolFillingUp")["expr"]
    assert "lineage_proxy_spool_bytes / lineage_proxy_spool_max_bytes" in spool
    for rule in _alert_rules():
        # No absolute byte or lag figure: they never fire with a smaller limit, or fire
        # forever on a busy topic.
        assert not re.search(r"> *(1e9|10000)\b", rule["expr"]), rule["alert"]
    stalled = _rule("LineageConsumerStalled")["expr"]
    assert "lineage_consumer_lag" in stalled and "lineage_consumer_delivered_total" in stalled
    assert "deriv(lineage_consumer_lag" in _rule("LineageConsumerFallingBehind")["expr"]


@pytest.mark.parametrize(
    ("alert", "metric"),
    [
        ("LineageProxyBestEffortDropped", "lineage_proxy_best_effort_dropped_total"),
        ("LineageProxySpoolNotDraining", "lineage_proxy_spool_oldest_age_seconds"),
        ("LineageProxyKafkaUnreachable", "lineage_proxy_kafka_reachable"),
        ("LineageConsumerDeadLettersGrowing", "lineage_consumer_dead_lettered_total"),
        ("LineageConsumerCircuitOpen", "lineage_consumer_circuit_open"),
        ("LineageProxyRejectionRateHigh", "lineage_proxy_events_rejected_total"),
        ("LineageProxyDiskFillingUp", "lineage_proxy_disk_available_bytes"),
        ("LineageProxyDiskFullWithinADay", "lineage_proxy_disk_available_bytes"),
        ("LineageProxySpoolStranded", "lineage_proxy_spool_stranded_events"),
    ],
)
def test_alert_watches_its_metric(alert: str, metric: str):
    assert metric in _metric_names(_rule(alert)["expr"])


# --- dashboard --------------------------------------------------------------------------


def test_dashboard_panels_are_unique_placed_and_use_the_datasource_variable():
    dashboard = _dashboard()
    assert dashboard["uid"] and dashboard["title"]
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"])
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"].strip("${}") in variables


def test_dashboard_filters_by_namespace_job_instance_and_consumer():
    variables = {v["name"]: v for v in _dashboard()["templating"]["list"]}
    assert {"namespace", "job", "instance", "consumer"} <= set(variables)
    for name in ("namespace", "job", "instance", "consumer"):
        assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*"
    for expr in _dashboard_exprs():
        for selector in re.findall(r"\b(?:lineage_[a-z0-9_]+|up)(\{[^}]*\})?", expr):
            assert 'namespace=~"$namespace"' in selector, expr
            assert 'instance=~"$instance"' in selector, expr
        for selector in re.findall(r"\blineage_consumer_[a-z0-9_]+(\{[^}]*\})?", expr):
            assert 'consumer=~"$consumer"' in selector, expr


def test_dashboard_rates_use_the_rate_interval():
    for expr in _dashboard_exprs():
        for window in re.findall(r"\b(?:rate|irate)\([^\[]*\[([^\]]+)\]", expr):
            assert window == "$__rate_interval", expr


def test_dashboard_opens_with_a_healthy_now_row_of_stats():
    panels = sorted(_dashboard()["panels"], key=lambda p: (p["gridPos"]["y"], p["gridPos"]["x"]))
    assert panels[0]["type"] == "row" and "healthy" in panels[0]["title"].lower()
    first_row = [p for p in panels[1:] if p["gridPos"]["y"] == panels[1]["gridPos"]["y"]]
    assert len(first_row) >= 6 and all(p["type"] == "stat" for p in first_row)
    watched = set().union(*(_metric_names(t["expr"]) for p in first_row for t in p["targets"]))
    assert {
        "lineage_proxy_kafka_reachable",
        "lineage_proxy_spool_max_bytes",
        "lineage_proxy_spool_oldest_age_seconds",
        "lineage_consumer_lag",
    } <= watched
    exprs = [t["expr"] for p in first_row for t in p["targets"]]
    assert any(e.startswith("count(up{") for e in exprs)
    assert any("ALERTS{" in e for e in exprs)
