"""The Helm chart (deploy/helm/lineage-proxy) rendered by the real `helm`, checked by
`helm lint`, by kubeconform --strict against the Kubernetes and prometheus-operator
schemas, and by assertions on the objects it renders for several sets of values.

What must hold: every proxy pod has its own persistent spool (a StatefulSet claim, never
an emptyDir or a shared volume), a pod drains its spool before it goes, voluntary
disruptions take one proxy pod at a time, consumers keep their state on their own
volumes, and the chart follows the usual conventions (see docs/deploy/kubernetes.md).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from proxy.cli.main import build_parser
from proxy.config.settings import ProxyConfig, load_config
from routing_rules.loader import BUILTIN_RULES, load_rules_file
from tests.support.config_paths import CONFIG_INPUTS, used_paths
from tests.support.deploy_tools import KUBERNETES_VERSION, kubernetes_schemas, run_tool
from tests.support.paths import REPO

CHART = REPO / "deploy" / "helm" / "lineage-proxy"
ALERTS = REPO / "deploy" / "prometheus" / "lineage-proxy-alerts.yaml"
DASHBOARD = REPO / "deploy" / "grafana" / "lineage-proxy-dashboard.json"
RELEASE, NAMESPACE = "lp", "lineage"
FULLNAME = "lp-lineage-proxy"
# Where the pods mount the ConfigMap (config.yaml, rules.yaml).
CONFIG_MOUNT = "/etc/lineage-proxy"

# Value sets the chart is rendered, linted and validated with.
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "no-persistence": {"persistence": {"enabled": False}},
    "monitoring": {
        "metrics": {
            "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
            "prometheusRule": {"enabled": True, "runbookUrl": "https://wiki.example/lp.md"},
            "dashboard": {"enabled": True},
        }
    },
    "everything": {
        "image": {"repository": "registry.example/lineage-proxy", "tag": "9.9.9"},
        "imagePullSecrets": [{"name": "regcred"}],
        "persistence": {"size": "50Gi", "storageClass": "fast-ssd"},
        "ingress": {
            "enabled": True,
            "className": "nginx",
            "hosts": [
                {"host": "lineage.example.com", "paths": [{"path": "/", "pathType": "Prefix"}]}
            ],
            "tls": [{"secretName": "lineage-tls", "hosts": ["lineage.example.com"]}],
        },
        "proxy": {
            "autoscaling": {"enabled": True},
            "tls": {"secretName": "lp-tls", "clientCert": "optional"},
            "tolerations": [{"key": "lineage", "operator": "Exists", "effect": "NoSchedule"}],
        },
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
            }
        ],
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "x"}},
                        },
                    }
                ]
            }
        },
        "kafka": {"credentials": {"secretName": "kafka-user"}},
        "secretEnv": [{"name": "TEAM_A_TOKEN", "secretName": "tokens", "key": "team-a"}],
        "extraEnv": [{"name": "LINEAGE_PROXY__LOGGING__LEVEL", "value": "DEBUG"}],
        "rules": {"rules": [{"name": "all", "match": {}, "to": ["kafka"]}]},
        "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/x"}},
        "config": {"server": {"shutdown_timeout_seconds": 50}},
    },
    # A consumer that keeps files (a dedupe journal) beside one that keeps nothing.
    "consumers": {
        "config": {
            "consumers": {
                "archive": {
                    "target": {"kind": "object_archive", "bucket": "lineage", "prefix": "events"}
                },
            }
        },
        "consumers": [
            {"name": "marquez", "statusPort": 9101},
            {"name": "archive", "statusPort": 9102},
        ],
    },
}


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(out.get(key), dict) else value
    return out


def _values_file(tmp: Path, values: dict[str, Any]) -> Path:
    path = tmp / f"values-{abs(hash(json.dumps(values, sort_keys=True)))}.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def helm_template(tmp: Path, values: dict[str, Any], *extra: str) -> str:
    done = run_tool(
        "helm",
        "template",
        RELEASE,
        CHART,
        "--namespace",
        NAMESPACE,
        "--values",
        _values_file(tmp, values),
        "--kube-version",
        KUBERNETES_VERSION,
        *extra,
    )
    return done.stdout


def _documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each value set's `helm template` output (one helm run per set)."""
    tmp = tmp_path_factory.mktemp("chart")
    return {
        name: helm_template(tmp, values, "--api-versions", "monitoring.coreos.com/v1")
        for name, values in VALUE_SETS.items()
    }


def objects(rendered: dict[str, str], value_set: str) -> dict[str, dict[str, Any]]:
    """``Kind/name`` → object."""
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in _documents(rendered[value_set])}


def _kinds(found: dict[str, dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for key, o in found.items() if key.startswith(f"{kind}/")]


def _pod_specs(found: dict[str, dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for key, obj in found.items():
        if obj["kind"] in ("StatefulSet", "Deployment"):
            yield key, obj["spec"]["template"]["spec"]
        elif obj["kind"] == "Pod":
            yield key, obj["spec"]


def _container(statefulset: dict[str, Any]) -> dict[str, Any]:
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    return container


def _literal_env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def _proxy(found: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return found[f"StatefulSet/{FULLNAME}"]


def _consumer(found: dict[str, dict[str, Any]], name: str = "marquez") -> dict[str, Any]:
    return found[f"StatefulSet/{FULLNAME}-consumer-{name}"]


def _pod_config(
    found: dict[str, dict[str, Any]],
    container: dict[str, Any],
    tmp: Path,
    environ: dict[str, str] | None = None,
) -> ProxyConfig:
    """The config a container loads: the ConfigMap's files as the pod mounts them (here
    under ``tmp``), with the container's literal environment (or ``environ``)."""
    for name, text in found[f"ConfigMap/{FULLNAME}"]["data"].items():
        (tmp / name).write_text(text)
    env = _literal_env(container) if environ is None else environ
    return load_config(
        tmp / "config.yaml", environ={k: v.replace(CONFIG_MOUNT, str(tmp)) for k, v in env.items()}
    )


# --- the real tools ------------------------------------------------------------------


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_helm_lint_passes(value_set: str, tmp_path: Path):
    done = run_tool(
        "helm", "lint", "--strict", CHART, "--values", _values_file(tmp_path, VALUE_SETS[value_set])
    )
    assert "0 chart(s) failed" in done.stdout


def test_rendered_objects_are_valid_kubernetes_objects(
    rendered: dict[str, str], tmp_path_factory: pytest.TempPathFactory
):
    location = kubernetes_schemas(tmp_path_factory.mktemp("schemas"))
    for value_set, text in rendered.items():
        manifest = tmp_path_factory.mktemp("manifests") / f"{value_set}.yaml"
        manifest.write_text(text)
        done = run_tool(
            "kubeconform",
            "-strict",
            "-summary",
            "-schema-location",
            location,
            manifest,
            check=False,
        )
        assert done.returncode == 0, f"{value_set}:\n{done.stdout}{done.stderr}"
        assert "Errors: 0, Skipped: 0" in done.stdout, done.stdout


def test_kubeconform_refuses_an_unknown_field(rendered: dict[str, str], tmp_path: Path):
    """The validation above can fail: a misspelt field of a StatefulSet or a
    ServiceMonitor is refused."""
    location = kubernetes_schemas(tmp_path / "schemas")
    found = objects(rendered, "monitoring")
    for key, path in ((f"StatefulSet/{FULLNAME}", "spec"), (f"ServiceMonitor/{FULLNAME}", "spec")):
        broken = json.loads(json.dumps(found[key]))
        broken[path]["replicaz"] = 3
        manifest = tmp_path / "broken.yaml"
        manifest.write_text(yaml.safe_dump(broken))
        done = run_tool(
            "kubeconform", "-strict", "-schema-location", location, manifest, check=False
        )
        assert done.returncode == 1 and "replicaz" in done.stdout, done.stdout


def test_values_schema_is_generated_from_the_config_models_and_up_to_date():
    done = subprocess.run(
        [sys.executable, REPO / "scripts" / "chart_schema.py"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == (CHART / "values.schema.json").read_text(), (
        "values.schema.json is stale: run scripts/config_docs.sh"
    )
    schema = json.loads(done.stdout)
    assert "SpoolConfig" in schema["$defs"]  # config: is the config models' schema


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"config": {"kafka": {"bootstrap_server": "x:9092"}}}, "bootstrap_server"),
        ({"config": {"kafka": {"spool": {"max_bytes": "lots"}}}}, "max_bytes"),
        ({"persistence": {"sise": "1Gi"}}, "sise"),
        ({"proxy": {"tls": {"clientCert": "required"}}}, "clientCert"),
    ],
)
def test_helm_refuses_values_the_schema_refuses(values: dict[str, Any], named: str, tmp_path: Path):
    done = run_tool(
        "helm", "template", RELEASE, CHART, "--values", _values_file(tmp_path, values), check=False
    )
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr
    assert named in done.stderr, done.stderr


# --- item 3: every pod keeps its own spool, and drains it before it goes ----------------


def test_proxy_is_a_statefulset_with_a_claim_per_pod_for_its_spool(rendered: dict[str, str]):
    found = objects(rendered, "defaults")
    assert not _kinds(found, "Deployment"), "a Deployment's pods share or lose their spool"
    assert not _kinds(found, "HorizontalPodAutoscaler")
    proxy = _proxy(found)
    (claim,) = proxy["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "state"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert "storageClassName" not in claim["spec"]  # the cluster's default
    # A scale-in keeps the claim: events a drain could not forward are not deleted.
    assert proxy["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }
    pod = proxy["spec"]["template"]["spec"]
    assert "state" not in {v["name"] for v in pod["volumes"]}
    (mount,) = [m for m in _container(proxy)["volumeMounts"] if m["name"] == "state"]
    assert (
        PurePosixPath(mount["mountPath"])
        in PurePosixPath(
            yaml.safe_load(found[f"ConfigMap/{FULLNAME}"]["data"]["config.yaml"])["kafka"]["spool"][
                "directory"
            ]
        ).parents
    )


def test_persistence_size_and_storage_class_reach_the_claims(rendered: dict[str, str]):
    found = objects(rendered, "everything")
    for statefulset in (_proxy(found), _consumer(found)):
        (claim,) = statefulset["spec"]["volumeClaimTemplates"]
        assert claim["spec"]["storageClassName"] == "fast-ssd"
    (proxy_claim,) = _proxy(found)["spec"]["volumeClaimTemplates"]
    (consumer_claim,) = _consumer(found)["spec"]["volumeClaimTemplates"]
    assert proxy_claim["spec"]["resources"]["requests"]["storage"] == "50Gi"
    assert consumer_claim["spec"]["resources"]["requests"]["storage"] == "1Gi"


def test_without_persistence_the_state_is_an_emptydir(rendered: dict[str, str]):
    found = objects(rendered, "no-persistence")
    for statefulset in (_proxy(found), _consumer(found)):
        assert "volumeClaimTemplates" not in statefulset["spec"]
        volumes = {v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]}
        assert volumes["state"] == {"name": "state", "emptyDir": {}}


@pytest.mark.parametrize("value_set", ["defaults", "everything"])
def test_proxy_drains_its_spool_before_it_goes_within_its_grace_period(
    rendered: dict[str, str], value_set: str
):
    found = objects(rendered, value_set)
    proxy = _proxy(found)
    values = _merge(yaml.safe_load((CHART / "values.yaml").read_text()), VALUE_SETS[value_set])
    drain = values["proxy"]["drainTimeoutSeconds"]
    command = _container(proxy)["lifecycle"]["preStop"]["exec"]["command"]
    assert command[:3] == ["python", "-m", "proxy.server.prestop"]
    assert command[command.index("--timeout") + 1] == str(drain)
    assert command[command.index("--config") + 1] == "/etc/lineage-proxy/config.yaml"
    shutdown = ProxyConfig.model_validate(values["config"]).server.shutdown_timeout_seconds
    grace = proxy["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace == drain + shutdown + 15
    assert grace == (drain + 30 + 15 if value_set == "defaults" else drain + 50 + 15)


def test_the_prestop_hook_is_a_module_the_image_has():
    """The hook runs `python -m proxy.server.prestop` in the proxy's image: it must exist and
    take the arguments the chart gives it."""
    done = subprocess.run(
        [sys.executable, "-m", "proxy.server.prestop", "--help"], capture_output=True, text=True
    )
    assert done.returncode == 0 and "--timeout" in done.stdout and "--config" in done.stdout


def test_disruptions_take_one_proxy_pod_at_a_time(rendered: dict[str, str]):
    found = objects(rendered, "defaults")
    (pdb,) = _kinds(found, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    pod_labels = _proxy(found)["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    consumer_labels = _consumer(found)["spec"]["template"]["metadata"]["labels"]
    assert not pdb["spec"]["selector"]["matchLabels"].items() <= consumer_labels.items()


def test_an_autoscaler_scales_the_statefulset_in_one_drained_pod_at_a_time(
    rendered: dict[str, str],
):
    found = objects(rendered, "everything")
    (hpa,) = _kinds(found, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": FULLNAME,
    }
    (policy,) = hpa["spec"]["behavior"]["scaleDown"]["policies"]
    assert policy["type"] == "Pods" and policy["value"] == 1
    grace = _proxy(found)["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert policy["periodSeconds"] >= grace
    assert "replicas" not in _proxy(found)["spec"]  # the HPA owns it


def test_consumers_keep_their_state_on_their_own_volumes(rendered: dict[str, str]):
    found = objects(rendered, "defaults")
    consumer = _consumer(found)
    (claim,) = consumer["spec"]["volumeClaimTemplates"]
    # A claim template of another StatefulSet: its volumes are never the proxy's.
    assert claim["metadata"]["labels"]["app.kubernetes.io/component"] == "consumer-marquez"
    mounts = {m["name"] for m in _container(consumer)["volumeMounts"]}
    assert "state" in mounts
    assert consumer["spec"]["serviceName"] in {
        s["metadata"]["name"] for s in _kinds(found, "Service")
    }


# --- the pods run what the config says ------------------------------------------------


def test_proxy_probes_readyz_and_healthz_on_its_port_and_listens_where_the_config_says(
    rendered: dict[str, str],
):
    proxy = _container(_proxy(objects(rendered, "defaults")))
    assert proxy["args"][0] == "serve"
    (port,) = proxy["ports"]
    assert port["containerPort"] == 5000
    assert proxy["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    assert proxy["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    # Set, not the kubelet's 1 s default (seen failing with no timeoutSeconds: a proxy
    # answering late under a burst would leave the Service).
    assert (
        proxy["readinessProbe"]["timeoutSeconds"] == proxy["livenessProbe"]["timeoutSeconds"] == 3
    )
    assert _literal_env(proxy)["LINEAGE_PROXY__SERVER__PORT"] == "5000"
    tls = _container(_proxy(objects(rendered, "everything")))
    assert tls["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"


@pytest.mark.parametrize("workers", [1, 3])
def test_proxy_runs_the_chosen_workers_and_requests_a_cpu_share_for_each(
    workers: int, tmp_path: Path
):
    found = {
        f"{o['kind']}/{o['metadata']['name']}": o
        for o in _documents(helm_template(tmp_path, {"proxy": {"workers": workers}}))
    }
    proxy = _container(_proxy(found))
    assert proxy["args"][proxy["args"].index("--workers") + 1] == str(workers)
    assert proxy["resources"]["requests"] == {
        "cpu": f"{workers * 250}m",
        "memory": "256Mi",
        "ephemeral-storage": "256Mi",
    }
    assert proxy["resources"]["limits"] == {"memory": "1Gi"}


def test_consumer_probes_its_status_port(rendered: dict[str, str]):
    container = _container(_consumer(objects(rendered, "defaults")))
    assert container["args"][:2] == ["consume", "marquez"]
    (port,) = container["ports"]
    assert port["containerPort"] == 9101
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    # /healthz is 503 during a target or Kafka outage, which a restart cannot cure.
    assert container["livenessProbe"]["tcpSocket"] == {"port": port["name"]}


@pytest.mark.parametrize("which", ["proxy", "consumer"])
def test_chart_config_loads_and_everything_written_is_on_the_state_volume(
    rendered: dict[str, str], which: str, tmp_path: Path
):
    found = objects(rendered, "defaults")
    statefulset = _proxy(found) if which == "proxy" else _consumer(found)
    container = _container(statefulset)
    mounts = {m["name"]: PurePosixPath(m["mountPath"]) for m in container["volumeMounts"]}
    config = _pod_config(found, container, tmp_path)
    command = container["args"][: container["args"].index("--config")]
    if command[0] == "consume":
        assert config.consumers[command[1]].status_port == container["ports"][0]["containerPort"]
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


def test_kafka_credentials_reach_the_producer_and_each_consumer_group(
    rendered: dict[str, str], tmp_path: Path
):
    found = objects(rendered, "everything")
    environ = {}
    for statefulset in (_proxy(found), _consumer(found)):
        for entry in _container(statefulset)["env"]:
            if entry.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == "kafka-user":
                environ[entry["name"]] = "secret"
    config_file = tmp_path / "config.yaml"
    config_file.write_text(found[f"ConfigMap/{FULLNAME}"]["data"]["config.yaml"])
    config = load_config(config_file, environ=environ)
    assert config.kafka.producer["sasl.password"] == "secret"
    assert config.kafka.producer["sasl.username"] == "secret"
    assert config.consumers["marquez"].group.settings["sasl.username"] == "secret"


# --- item 9: conventions --------------------------------------------------------------


def test_image_tag_defaults_to_the_app_version(rendered: dict[str, str]):
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    for value_set, image in (
        ("defaults", f"lineage-proxy:{app_version}"),
        ("everything", "registry.example/lineage-proxy:9.9.9"),
    ):
        for key, pod in _pod_specs(objects(rendered, value_set)):
            for container in pod["containers"]:
                assert container["image"] == image, key


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_every_pod_runs_unprivileged_with_the_runtime_default_seccomp_profile(
    rendered: dict[str, str], value_set: str
):
    pods = list(_pod_specs(objects(rendered, value_set)))
    assert len(pods) >= 3  # proxy, consumer, helm test
    for key, pod in pods:
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, key
        assert pod["securityContext"]["runAsNonRoot"] is True, key
        assert pod["automountServiceAccountToken"] is False, key
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, key
            assert context["readOnlyRootFilesystem"] is True, key


def test_service_account_pull_secrets_scheduling_and_extra_env_reach_every_pod(
    rendered: dict[str, str],
):
    found = objects(rendered, "everything")
    (account,) = _kinds(found, "ServiceAccount")
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"]
    for statefulset in (_proxy(found), _consumer(found)):
        pod = statefulset["spec"]["template"]["spec"]
        component = statefulset["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"]
        assert pod["serviceAccountName"] == account["metadata"]["name"]
        assert pod["imagePullSecrets"] == [{"name": "regcred"}]
        assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
        assert "podAntiAffinity" in pod["affinity"]
        (spread,) = pod["topologySpreadConstraints"]
        # The chart selects the pods of this component when the values give no selector.
        assert spread["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == component
        env = {e["name"]: e for e in _container(statefulset)["env"]}
        assert env["LINEAGE_PROXY__LOGGING__LEVEL"]["value"] == "DEBUG"
        assert env["TEAM_A_TOKEN"]["valueFrom"]["secretKeyRef"] == {
            "name": "tokens",
            "key": "team-a",
        }
    # A key set under proxy: overrides the top level's for the proxy only.
    assert _proxy(found)["spec"]["template"]["spec"]["tolerations"][0]["key"] == "lineage"
    assert "tolerations" not in _consumer(found)["spec"]["template"]["spec"]


def test_ingress_routes_to_the_proxy_service(rendered: dict[str, str]):
    found = objects(rendered, "everything")
    (ingress,) = _kinds(found, "Ingress")
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"] == [
        {"secretName": "lineage-tls", "hosts": ["lineage.example.com"]}
    ]
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    service = found[f"Service/{backend['name']}"]
    assert backend["port"]["name"] in {p["name"] for p in service["spec"]["ports"]}
    assert not _kinds(objects(rendered, "defaults"), "Ingress")


def _selected(selector: dict[str, str], found: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        s
        for s in _kinds(found, "Service")
        if selector.items() <= s["metadata"].get("labels", {}).items()
    ]


def test_service_monitors_scrape_the_jobs_the_alerts_watch(rendered: dict[str, str]):
    found = objects(rendered, "monitoring")
    monitors = _kinds(found, "ServiceMonitor")
    assert len(monitors) == 2
    jobs = set()
    for monitor in monitors:
        assert monitor["metadata"]["labels"]["release"] == "prometheus"
        (service,) = _selected(monitor["spec"]["selector"]["matchLabels"], found)
        # jobLabel: the job label's value is this label of the Service.
        jobs.add(service["metadata"]["labels"][monitor["spec"]["jobLabel"]])
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
        assert endpoint["path"] == "/metrics"
    alerts = ALERTS.read_text()
    assert jobs == {"lineage-proxy", "lineage-consumer"}
    for job in jobs:
        assert f'up{{job="{job}"}}' in alerts
    assert not _kinds(objects(rendered, "defaults"), "ServiceMonitor")


def test_prometheus_rule_carries_the_alerts_with_runbook_links(rendered: dict[str, str]):
    found = objects(rendered, "monitoring")
    (rule,) = _kinds(found, "PrometheusRule")
    expected = yaml.safe_load(ALERTS.read_text())
    for group in expected["groups"]:
        for alert in group["rules"]:
            anchor = alert["annotations"]["runbook_url"].split("#")[1]
            alert["annotations"]["runbook_url"] = f"https://wiki.example/lp.md#{anchor}"
    assert rule["spec"] == expected


def test_dashboard_config_map_holds_the_dashboard(rendered: dict[str, str]):
    found = objects(rendered, "monitoring")
    config_map = found[f"ConfigMap/{FULLNAME}-dashboard"]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["lineage-proxy-dashboard.json"]) == json.loads(
        DASHBOARD.read_text()
    )


def test_helm_test_asks_the_proxy_service_for_readyz(rendered: dict[str, str]):
    for value_set, scheme in (("defaults", "http"), ("everything", "https")):
        found = objects(rendered, value_set)
        (pod,) = _kinds(found, "Pod")
        assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
        (container,) = pod["spec"]["containers"]
        assert container["command"][-1] == f"{scheme}://{FULLNAME}:80/readyz"
        assert found[f"Service/{FULLNAME}"]["spec"]["ports"][0]["port"] == 80


def test_notes_say_where_to_send_events_and_warn_without_persistence(tmp_path: Path):
    """NOTES.txt as `helm install` prints it: `helm template` leaves it out and `helm
    install --dry-run` needs a cluster, so a copy of the chart gets one more template
    that includes it."""
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart, symlinks=False)
    (chart / "templates" / "notes-render.yaml").write_text(
        'notes: {{ include "lineage-proxy/templates/NOTES.txt" . | toJson }}\n'
    )

    def notes(values: dict[str, Any]) -> str:
        done = run_tool(
            "helm",
            "template",
            RELEASE,
            chart,
            "--namespace",
            NAMESPACE,
            "--values",
            _values_file(tmp_path, values),
            "--show-only",
            "templates/notes-render.yaml",
        )
        text: str = yaml.safe_load(done.stdout)["notes"]
        return text

    default = notes({})
    assert f"OPENLINEAGE_URL=http://{FULLNAME}.{NAMESPACE}.svc:80" in default
    assert f"helm test {RELEASE}" in default
    assert "WARNING" not in default
    assert "are LOST when a pod is rescheduled" in notes({"persistence": {"enabled": False}})
    ingress = notes(VALUE_SETS["everything"])
    assert "https://lineage.example.com/api/v1/lineage" in ingress


def test_tls_variables_load_as_server_tls_with_files_on_the_secrets_mount(
    rendered: dict[str, str], tmp_path: Path
):
    """proxy.support.tls: the variables the chart sets load as server.tls, each file where the
    Secret is mounted; the probes speak HTTPS (a required client certificate, which the
    probes cannot present, is refused by the schema: see above)."""
    found = objects(rendered, "everything")
    proxy = _proxy(found)
    container = _container(proxy)
    env = {k: v for k, v in _literal_env(container).items() if "__TLS__" in k}
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "tls"]
    volumes = {v["name"]: v for v in proxy["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "lp-tls"
    config_file = tmp_path / "config.yaml"
    config_file.write_text(found[f"ConfigMap/{FULLNAME}"]["data"]["config.yaml"])
    tls = load_config(config_file, environ=env).server.tls
    assert tls is not None and tls.client_cert == "optional"
    assert [str(path) for _, path in tls.files()] == [
        f"{mount['mountPath']}/{name}" for name in ("tls.crt", "tls.key", "ca.crt")
    ]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["scheme"] == "HTTPS"
    assert (
        "scheme"
        not in _container(_proxy(objects(rendered, "defaults")))["readinessProbe"]["httpGet"]
    )


# --- issue 37: the chart cannot fill its own volume, and says what it does --------------


def test_default_rules_keep_nothing_on_the_proxy_volume_but_the_spool(
    rendered: dict[str, str], tmp_path: Path
):
    """The rules a default install's proxy loads send events to Kafka only: no archive
    destination writes onto the pod's volume, where it would keep every file and, full,
    answer 503 to every POST while Kafka is healthy. Seen failing on the old chart (no
    rules file mounted: the built-in rules, with `archive` and `rejected_archive`)."""
    found = objects(rendered, "defaults")
    config = _pod_config(found, _container(_proxy(found)), tmp_path)
    rules = load_rules_file(config.routing.rules or BUILTIN_RULES)
    kinds = {name: d.kind for name, d in rules.destinations.items()}
    assert "archive" not in kinds.values(), kinds
    assert [kinds[name] for name in rules.default.to] == ["kafka"]
    assert rules.rejected is not None and [kinds[n] for n in rules.rejected.to] == ["kafka"]
    # The spool alone is what the volume holds, and its limit fits the claim.
    (claim,) = _proxy(found)["spec"]["volumeClaimTemplates"]
    size = claim["spec"]["resources"]["requests"]["storage"]
    assert size.endswith("Gi") and config.kafka.spool.max_bytes < int(size[:-2]) << 30
    # Rules of the values still replace the default.
    everything = objects(rendered, "everything")
    own = yaml.safe_load(everything[f"ConfigMap/{FULLNAME}"]["data"]["rules.yaml"])
    assert own == VALUE_SETS["everything"]["rules"]


def test_a_rules_file_named_in_the_config_is_not_overridden(tmp_path: Path):
    """config.routing.rules (a file in the image, say) stays what the proxy loads: the
    chart's variable would silently win over it."""
    values = {"config": {"routing": {"rules": "/opt/lineage/rules.yaml"}}}
    found = {
        f"{o['kind']}/{o['metadata']['name']}": o
        for o in _documents(helm_template(tmp_path, values))
    }
    config = _pod_config(found, _container(_proxy(found)), tmp_path)
    assert config.routing.rules == Path("/opt/lineage/rules.yaml")


@pytest.mark.parametrize("value_set", ["defaults", "everything", "consumers"])
def test_every_container_requests_ephemeral_storage(rendered: dict[str, str], value_set: str):
    """/tmp (an emptyDir) and the logs are on the node's disk: the scheduler must count
    them. Seen failing on the old chart (no container requested ephemeral-storage)."""
    found = objects(rendered, value_set)
    statefulsets = _kinds(found, "StatefulSet")
    assert len(statefulsets) >= 2
    for statefulset in statefulsets:
        requests = _container(statefulset)["resources"]["requests"]
        assert requests.get("ephemeral-storage"), statefulset["metadata"]["name"]


def test_a_consumer_that_keeps_no_files_gets_no_volume(rendered: dict[str, str]):
    """An object_archive consumer keeps nothing on disk (offsets are in Kafka): its state
    is an emptyDir, not a claim per pod; a consumer with a dedupe journal keeps a claim
    of the consumer's size (1Gi), never the proxy's persistence.size. Seen failing on the
    old chart (both got a claim, of 10Gi when the entry named no size)."""
    found = objects(rendered, "consumers")
    stateless = _consumer(found, "archive")
    assert "volumeClaimTemplates" not in stateless["spec"]
    volumes = {v["name"]: v for v in stateless["spec"]["template"]["spec"]["volumes"]}
    assert volumes["state"] == {"name": "state", "emptyDir": {}}
    (claim,) = _consumer(found, "marquez")["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"


@pytest.mark.parametrize("enabled", [True, False])
def test_a_consumers_persistence_enabled_overrides_what_its_config_implies(
    enabled: bool, tmp_path: Path
):
    """consumers[].persistence.enabled wins over the guess from the config (a journal
    means a claim); the top level's persistence.enabled: false still means no claim."""
    entry = {"name": "marquez", "statusPort": 9101, "persistence": {"enabled": enabled}}
    values: dict[str, Any] = {"consumers": [entry]}
    found = {
        f"{o['kind']}/{o['metadata']['name']}": o
        for o in _documents(helm_template(tmp_path, values))
    }
    assert ("volumeClaimTemplates" in _consumer(found)["spec"]) is enabled
    values["persistence"] = {"enabled": False}
    found = {
        f"{o['kind']}/{o['metadata']['name']}": o
        for o in _documents(helm_template(tmp_path, values))
    }
    assert "volumeClaimTemplates" not in _consumer(found)["spec"]


@pytest.mark.parametrize("name", ["archive_s3", "Archive", "a" * 55, "-archive", "archive-"])
def test_a_consumer_name_that_is_no_dns_label_is_refused(name: str, tmp_path: Path):
    """A consumer's name names its StatefulSet, Service and pods and is part of a label
    value, which the API server refuses unless it is a DNS label — and which `helm lint
    --strict` and kubeconform let through. Seen failing on the old chart (archive_s3
    and Archive rendered without an error)."""

    def values(consumer: str) -> dict[str, Any]:
        return {
            "config": {"consumers": {consumer: {"target": {"kind": "http", "url": "http://x"}}}},
            "consumers": [{"name": consumer, "statusPort": 9102}],
        }

    done = run_tool(
        "helm",
        "template",
        RELEASE,
        CHART,
        "--values",
        _values_file(tmp_path, values(name)),
        check=False,
    )
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr
    assert "consumers" in done.stderr and "name" in done.stderr, done.stderr
    assert "consumer-archive-s3" in helm_template(tmp_path, values("archive-s3"))


def test_the_statefulset_comment_says_what_parallel_pod_management_does(
    rendered: dict[str, str],
):
    """podManagementPolicy: Parallel removes the pods of a scale-in together (each drains
    its own spool meanwhile); the comment above it must not promise one at a time. Seen
    failing on the old chart ("a scale-in still takes one pod at a time")."""
    text = rendered["defaults"].split("templates/proxy-statefulset.yaml", 1)[1]
    before, _, _ = text.partition("podManagementPolicy: Parallel")
    assert before, "the proxy StatefulSet is Parallel"
    comment = " ".join(
        line.strip().lstrip("# ")
        for line in before.splitlines()[-6:]
        if line.strip().startswith("#")
    )
    assert not re.search(r"scale-in[^.]*one (pod )?at a time", comment), comment
    assert "at once" in comment or "together" in comment, comment


def test_the_runbooks_drain_pod_mounts_the_claim_and_runs_spool_drain(
    rendered: dict[str, str], tmp_path: Path
):
    """docs/operate/runbooks.md#lineageproxyspoolstranded builds a one-off pod from the proxy's
    pod template with jq: run on the rendered StatefulSet, its program makes a valid Pod
    (kubeconform) that runs `lineage-proxy spool drain` on the chart's config with the
    claim mounted where the spool is, and that no Service selects. Seen failing on the
    old runbook (no drain pod: scale back up only) and with the claim left out of the
    program (no state volume)."""
    runbook = (REPO / "docs" / "operate" / "runbooks.md").read_text()
    match = re.search(r"""jq --arg claim "\$claim" '(.*?)' \\""", runbook, re.S)
    assert match, "the runbook's jq program"
    found = objects(rendered, "defaults")
    statefulset = tmp_path / "statefulset.json"
    statefulset.write_text(json.dumps(_proxy(found)))
    jq = shutil.which("jq")
    assert jq, "jq is missing: apt-get install jq (scripts/test.sh does)"
    done = subprocess.run(
        [jq, "--arg", "claim", "state-lp-lineage-proxy-3", match[1], statefulset],
        capture_output=True,
        text=True,
        check=True,
    )
    pod = json.loads(done.stdout)
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(pod))
    location = kubernetes_schemas(tmp_path / "schemas")
    checked = run_tool("kubeconform", "-strict", "-schema-location", location, manifest)
    assert checked.returncode == 0
    assert "labels" not in pod["metadata"]  # no Service sends clients to it
    (container,) = pod["spec"]["containers"]
    assert "lifecycle" not in container and pod["spec"]["restartPolicy"] == "Never"
    args = container["args"]
    assert args[:2] == ["spool", "drain"]
    build_parser().parse_args(args)  # the image's entrypoint is lineage-proxy
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert (
        args[args.index("--config") + 1]
        == f"{mounts['config']}/config.yaml"
        == (f"{CONFIG_MOUNT}/config.yaml")
    )
    config = _pod_config(found, container, tmp_path)
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["state"]["persistentVolumeClaim"] == {"claimName": "state-lp-lineage-proxy-3"}
    state = PurePosixPath(mounts["state"])
    assert state in PurePosixPath(config.kafka.spool.directory).parents
