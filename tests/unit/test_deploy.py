"""deploy/: the Helm chart, the Grafana dashboard and the Prometheus alerts.

No `helm` binary here (neither Debian nor PyPI ship one), so the chart is checked by a
minimal render: plain value references (`.Values.a.b`, `$consumer.k`, piped to
quote/upper, or `mul` of such references) are filled from values.yaml; a line holding
only `toYaml X | nindent N` or `include "helper" … | nindent N` of a helper without
conditions is expanded; other lines holding only an action (if/range/end, helpers with
conditions) are dropped and any other action becomes a placeholder. The result must
parse as the Kubernetes objects we expect. Every value the templates use must exist in
values.yaml, and the config the chart mounts must load with the environment the chart
gives the pods.

The dashboard and the alerts may only use metric names the code exports (collected from
the registries the proxy and the consumer daemons create).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from consumers.metrics import ConsumerMetrics
from proxy.config import load_config
from proxy.destinations.kafka_spool import SpoolMetrics
from proxy.metrics import ProxyMetrics
from routing_rules.stats import RoutingStats
from tests.config_paths import CONFIG_INPUTS, used_paths
from tests.support.paths import REPO

DEPLOY = REPO / "deploy"
CHART = DEPLOY / "helm" / "lineage-proxy"
TEMPLATES = CHART / "templates"
DASHBOARD = DEPLOY / "grafana" / "lineage-proxy-dashboard.json"
ALERTS = DEPLOY / "prometheus" / "lineage-proxy-alerts.yaml"

_SERIES_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
}


def exported_series() -> set[str]:
    """Every series name /metrics of the proxy or of a consumer daemon can show."""
    proxy = ProxyMetrics()
    stats = RoutingStats()
    stats.loaded(True)  # as proxy/app.py registers it and the rules' first load marks it
    proxy.registry.register(stats)
    proxy.registry.register(SpoolMetrics(list))
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


def _dashboard_exprs() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [t["expr"] for p in panels for t in p.get("targets", [])]


@pytest.mark.parametrize("source", ["alerts", "dashboard"])
def test_alerts_and_dashboard_use_only_metrics_the_code_exports(source):
    exprs = [r["expr"] for r in _alert_rules()] if source == "alerts" else _dashboard_exprs()
    assert exprs
    known = exported_series()
    assert "lineage_consumer_lag" in known, "collecting the registries is broken"
    for expr in exprs:
        names = _metric_names(expr)
        assert names, f"no lineage metric in {expr!r}"
        assert names <= known, f"unknown metrics {names - known} in {expr!r}"


def test_alerts_cover_dlq_spool_circuit_lag_and_rejections():
    rules = _alert_rules()
    used = set().union(*(_metric_names(r["expr"]) for r in rules))
    for metric in (
        "lineage_consumer_dead_lettered_total",
        "lineage_proxy_spool_events",
        "lineage_proxy_spool_bytes",
        "lineage_consumer_circuit_open",
        "lineage_consumer_lag",
        "lineage_proxy_events_rejected_total",
    ):
        assert metric in used, metric
    for rule in rules:
        assert rule["alert"] and rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"]


def test_dashboard_panels_are_unique_placed_and_use_the_datasource_variable():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"]
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"])
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"].strip("${}") in variables


# --- the chart -------------------------------------------------------------------------

_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}")
_REFERENCE = re.compile(r"^(\$consumer|\$?\.Values)((?:\.\w+)+)$")
_BLOCK = re.compile(r'^(include "(?P<name>[^"]+)"|toYaml (?P<ref>\S+)) .*\| nindent (?P<n>\d+)$')
_PIPES: dict[str, Callable[[str], str]] = {"quote": json.dumps, "upper": str.upper}


def _values() -> dict[str, Any]:
    return yaml.safe_load((CHART / "values.yaml").read_text())


def _lookup(root: Any, dotted: str) -> Any:
    value = root
    for key in dotted.strip(".").split("."):
        assert isinstance(value, dict) and key in value, f"{dotted}: not in values.yaml"
        value = value[key]
    return value


def _resolve(reference: str, values: dict[str, Any], consumer: dict[str, Any]) -> Any:
    """`.Values.a.b` / `$.Values.a.b` / `$consumer.k`, or None for anything else."""
    match = _REFERENCE.match(reference)
    if not match:
        return None
    return _lookup(consumer if match[1] == "$consumer" else values, match[2])


def _fill(expression: str, values: dict[str, Any], consumer: dict[str, Any]) -> str:
    reference, *pipes = (part.strip() for part in expression.split("|"))
    if reference.startswith("mul "):
        factors = [_resolve(factor, values, consumer) for factor in reference.split()[1:]]
        value = None if None in factors else math.prod(factors)
    else:
        value = _resolve(reference, values, consumer)
    if value is None or any(p not in _PIPES for p in pipes):
        return "TEMPLATED"
    text = str(value)
    for pipe in pipes:
        text = _PIPES[pipe](text)
    return text


def _lone_action(line: str) -> str | None:
    match = _ACTION.fullmatch(line.strip())
    return match[1] if match else None


def _defines() -> dict[str, list[str]]:
    """The named templates of _helpers.tpl: name → body lines."""
    text = (TEMPLATES / "_helpers.tpl").read_text()
    found = re.findall(r'\{\{-? define "([^"]+)" -?\}\}\n?(.*?)\{\{-? end -?\}\}\n', text, re.S)
    return {name: body.splitlines() for name, body in found}


def _has_conditions(body: list[str]) -> bool:
    actions = (_lone_action(line) for line in body)
    return any(action is not None and not _BLOCK.match(action) for action in actions)


def _render_lines(lines: list[str], values: dict[str, Any], consumer: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for line in lines:
        action = _lone_action(line)
        if action is None:
            out.append(_ACTION.sub(lambda m: _fill(m[1], values, consumer), line))
            continue
        block = _BLOCK.match(action)
        if block is None:
            continue  # control flow: if/range/end, fail
        pad = " " * int(block["n"])
        if block["ref"]:
            dumped = yaml.safe_dump(_resolve(block["ref"], values, consumer))
            out.extend(pad + text for text in dumped.splitlines())
        elif not _has_conditions(body := _defines()[block["name"]]):
            out.extend(pad + text for text in _render_lines(body, values, consumer))
    return out


def _render(template: Path, values: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects of a template, by the minimal render the module docstring describes;
    a `range` over consumers is rendered for the first one."""
    lines = _render_lines(template.read_text().splitlines(), values, values["consumers"][0])
    return [doc for doc in yaml.safe_load_all("\n".join(lines)) if doc]


def _objects() -> dict[str, dict[str, Any]]:
    values = _values()
    objects = {}
    for template in sorted(TEMPLATES.glob("*.yaml")):
        for obj in _render(template, values):
            objects[f"{obj['kind']}/{template.stem}"] = obj
    return objects


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def _literal_env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def test_chart_metadata_and_values_parse():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == CHART.name
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])
    assert isinstance(_values(), dict)


def test_every_value_the_templates_use_is_in_values_yaml():
    values = _values()
    texts = [p.read_text() for p in TEMPLATES.iterdir()]
    references = {m for t in texts for m in re.findall(r"\.Values((?:\.\w+)+)", t)}
    assert {".proxy.port", ".config", ".stateVolume"} <= references
    for reference in references:
        _lookup(values, reference)
    consumer_keys = {m for t in texts for m in re.findall(r"\$consumer\.(\w+)", t)}
    for consumer in values["consumers"]:
        assert consumer_keys <= set(consumer), consumer_keys - set(consumer)


def test_chart_renders_proxy_deployment_service_hpa_configmap_and_a_consumer_each():
    objects = _objects()
    assert set(objects) == {
        "ConfigMap/configmap",
        "Deployment/proxy-deployment",
        "Service/proxy-service",
        "HorizontalPodAutoscaler/proxy-hpa",
        "Deployment/consumer-deployments",
    }
    hpa = objects["HorizontalPodAutoscaler/proxy-hpa"]
    assert hpa["spec"]["scaleTargetRef"]["kind"] == "Deployment"
    assert objects["Service/proxy-service"]["spec"]["ports"][0]["targetPort"] == "http"
    assert set(objects["ConfigMap/configmap"]["data"]) >= {"config.yaml"}


def test_proxy_probes_readyz_and_healthz_on_its_port_and_listens_where_the_config_says():
    values = _values()
    proxy = _container(_objects()["Deployment/proxy-deployment"])
    assert proxy["args"][0] == "serve"
    (port,) = proxy["ports"]
    assert port["containerPort"] == values["proxy"]["port"]
    assert proxy["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    assert proxy["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    env = _literal_env(proxy)
    assert env["LINEAGE_PROXY__SERVER__PORT"] == str(values["proxy"]["port"])


@pytest.mark.parametrize("workers", [1, 3])
def test_proxy_runs_the_chosen_workers_and_requests_a_cpu_share_for_each(workers: int):
    values = _values()
    assert values["proxy"]["workers"] == 1  # the default: one process, as before
    values["proxy"]["workers"] = workers
    (deployment,) = _render(TEMPLATES / "proxy-deployment.yaml", values)
    proxy = _container(deployment)
    assert proxy["args"][proxy["args"].index("--workers") + 1] == str(workers)
    requests = proxy["resources"]["requests"]
    assert requests["cpu"] == f"{workers * values['proxy']['cpuPerWorkerMillicores']}m"
    assert requests["memory"] == values["proxy"]["resources"]["requests"]["memory"]
    assert proxy["resources"]["limits"] == values["proxy"]["resources"]["limits"]


def test_consumer_probes_its_status_port_and_the_config_agrees():
    values = _values()
    consumer = values["consumers"][0]
    container = _container(_objects()["Deployment/consumer-deployments"])
    assert container["args"][:2] == ["consume", consumer["name"]]
    (port,) = container["ports"]
    assert port["containerPort"] == consumer["statusPort"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    # /healthz is 503 during a target or Kafka outage, which a restart cannot cure.
    assert container["livenessProbe"]["tcpSocket"] == {"port": port["name"]}
    assert "httpGet" not in container["livenessProbe"]
    for entry in values["consumers"]:
        assert entry["name"] in values["config"]["consumers"], entry["name"]


@pytest.mark.parametrize("deployment", ["proxy-deployment", "consumer-deployments"])
def test_chart_config_loads_and_everything_written_is_on_the_state_volume(
    deployment, tmp_path: Path
):
    values = _values()
    container = _container(_objects()[f"Deployment/{deployment}"])
    mounts = {m["name"]: PurePosixPath(m["mountPath"]) for m in container["volumeMounts"]}
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(values["config"]))
    config = load_config(config_file, environ=_literal_env(container))
    command = container["args"][: container["args"].index("--config")]
    if command[0] == "consume":
        assert config.consumers[command[1]].status_port == values["consumers"][0]["statusPort"]
        assert config.consumers[command[1]].status_host == "0.0.0.0"
    else:
        assert config.server.host == "0.0.0.0"
    paths = used_paths(config, command)
    assert paths
    for field, path in paths.items():
        if field in CONFIG_INPUTS:
            continue
        assert path.is_absolute() and mounts["state"] in PurePosixPath(path).parents, (
            f"{field} = {path}: not on the state volume {mounts['state']}"
        )


def test_kafka_credential_variables_name_the_librdkafka_settings(tmp_path: Path):
    helpers = (TEMPLATES / "_helpers.tpl").read_text()
    consumer = (TEMPLATES / "consumer-deployments.yaml").read_text()
    names = re.findall(r"name: LINEAGE_PROXY__\{\{ \.path \}\}__(\S+)", helpers)
    assert names == ["SASL.USERNAME", "SASL.PASSWORD"]
    assert '"path" "KAFKA__PRODUCER"' in helpers
    assert '"CONSUMERS__%s__GROUP__SETTINGS"' in consumer
    name = _values()["consumers"][0]["name"]
    environ = {}
    for path in ("KAFKA__PRODUCER", f"CONSUMERS__{name.upper()}__GROUP__SETTINGS"):
        environ.update({f"LINEAGE_PROXY__{path}__{n}": "secret" for n in names})
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(_values()["config"]))
    config = load_config(config_file, environ=environ)
    assert config.kafka.producer["sasl.password"] == "secret"
    assert config.consumers[name].group.settings["sasl.username"] == "secret"
