"""The emitter's settings, from ``enable_lineage`` arguments, Spark conf and environment.

Precedence: explicit arguments, then Spark conf keys (named like the official
openlineage-spark integration's, so one ``spark-submit --conf`` set serves both), then
the environment variables of the official Python client, then defaults.

| setting | Spark conf | environment |
|---|---|---|
| url | spark.openlineage.transport.url | OPENLINEAGE_URL |
| endpoint | spark.openlineage.transport.endpoint | OPENLINEAGE_ENDPOINT |
| api_key | spark.openlineage.transport.auth.apiKey | OPENLINEAGE_API_KEY |
| timeout (s) | spark.openlineage.transport.timeoutInMillis (ms) | OPENLINEAGE_TIMEOUT |
| namespace | spark.openlineage.namespace | OPENLINEAGE_NAMESPACE |
| app_name | spark.openlineage.appName | — (default: spark.app.name) |
| parent job | spark.openlineage.parentJobNamespace / parentJobName / parentRunId | — |
| root job | spark.openlineage.rootParentJobNamespace / rootParentJobName / rootParentRunId | — |
| disabled | spark.openlineage.disabled | OPENLINEAGE_DISABLED |
| append dataset name | spark.openlineage.jobName.appendDatasetName | — |
| captured properties | spark.openlineage.capturedProperties | — |
| queue size | spark.openlineage.emitter.queueSize | — |
| drain timeout (s) | spark.openlineage.emitter.drainTimeoutSeconds | — |
| report read-only actions | spark.openlineage.emitter.reportReadOnlyActions | — |
| RUNNING interval (s) | spark.openlineage.emitter.runningIntervalSeconds | — |
| dataset-level column lineage | spark.openlineage.columnLineage.datasetLineageEnabled | — |

Read-only actions (``count()``, ``collect()``: a plan with no output) are not reported by
default, as the official integration filters them; ``reportReadOnlyActions=true`` reports
them as jobs of their own (``<app>.adaptive_spark_plan`` and the like).

An action's RUNNING events follow its Spark jobs' starts and ends, at most one per
``runningIntervalSeconds`` (default 10) per action, so an action of a thousand small Spark
jobs does not send a thousand events.

Column lineage has the official integration's default shape: the columns a filter, join,
grouping or sort depends on are listed among every output field's ``inputFields`` (as
INDIRECT transformations). ``columnLineage.datasetLineageEnabled=true`` (the official
option of the same name) lists them once instead, in the facet's ``dataset`` field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ConfigurationError", "EmitterConfig", "resolve_config"]

_CONF = "spark.openlineage."


class ConfigurationError(ValueError):
    """A setting has a value the emitter cannot use; the message names the key."""


@dataclass(frozen=True)
class EmitterConfig:
    url: str | None
    endpoint: str = "api/v1/lineage"
    api_key: str | None = None
    timeout: float = 5.0
    namespace: str = "default"
    app_name: str | None = None
    parent_namespace: str | None = None
    parent_name: str | None = None
    parent_run_id: str | None = None
    root_namespace: str | None = None
    root_name: str | None = None
    root_run_id: str | None = None
    disabled: bool = False
    append_dataset_name: bool = True
    captured_properties: tuple[str, ...] = ("spark.master", "spark.app.name")
    queue_size: int = 10_000
    drain_timeout: float = 10.0
    report_read_only_actions: bool = False
    running_interval: float = 10.0
    dataset_lineage_enabled: bool = False


def _flag(value: str, key: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ConfigurationError(f"{key}: expected true or false, got {value!r}")


def _number(value: str, key: str, kind: type[int] | type[float]) -> Any:
    try:
        number = kind(value)
    except ValueError:
        raise ConfigurationError(f"{key}: expected a number, got {value!r}") from None
    if number <= 0:
        raise ConfigurationError(f"{key}: must be positive, got {value!r}")
    return number


def resolve_config(
    spark_conf: Mapping[str, str],
    environ: Mapping[str, str],
    overrides: Mapping[str, Any],
) -> EmitterConfig:
    """Merge the three sources; ``overrides`` are ``enable_lineage`` keyword arguments
    (None means "not given")."""

    def pick(name: str, conf_key: str | None, env_key: str | None) -> str | None:
        if overrides.get(name) is not None:
            return str(overrides[name])
        if conf_key and spark_conf.get(_CONF + conf_key):
            return spark_conf[_CONF + conf_key]
        if env_key and environ.get(env_key):
            return environ[env_key]
        return None

    values: dict[str, Any] = {}
    for name, conf_key, env_key in (
        ("url", "transport.url", "OPENLINEAGE_URL"),
        ("endpoint", "transport.endpoint", "OPENLINEAGE_ENDPOINT"),
        ("api_key", "transport.auth.apiKey", "OPENLINEAGE_API_KEY"),
        ("namespace", "namespace", "OPENLINEAGE_NAMESPACE"),
        ("app_name", "appName", None),
        ("parent_namespace", "parentJobNamespace", None),
        ("parent_name", "parentJobName", None),
        ("parent_run_id", "parentRunId", None),
        ("root_namespace", "rootParentJobNamespace", None),
        ("root_name", "rootParentJobName", None),
        ("root_run_id", "rootParentRunId", None),
    ):
        if (value := pick(name, conf_key, env_key)) is not None:
            values[name] = value

    if overrides.get("timeout") is not None:
        values["timeout"] = _number(str(overrides["timeout"]), "timeout", float)
    elif ms := spark_conf.get(_CONF + "transport.timeoutInMillis"):
        values["timeout"] = _number(ms, _CONF + "transport.timeoutInMillis", float) / 1000
    elif seconds := environ.get("OPENLINEAGE_TIMEOUT"):
        values["timeout"] = _number(seconds, "OPENLINEAGE_TIMEOUT", float)

    if (disabled := pick("disabled", "disabled", "OPENLINEAGE_DISABLED")) is not None:
        values["disabled"] = _flag(disabled, _CONF + "disabled")
    if append := spark_conf.get(_CONF + "jobName.appendDatasetName"):
        values["append_dataset_name"] = _flag(append, _CONF + "jobName.appendDatasetName")
    if captured := spark_conf.get(_CONF + "capturedProperties"):
        values["captured_properties"] = tuple(p.strip() for p in captured.split(",") if p.strip())
    if size := pick("queue_size", "emitter.queueSize", None):
        values["queue_size"] = _number(size, _CONF + "emitter.queueSize", int)
    if read_only := pick("report_read_only_actions", "emitter.reportReadOnlyActions", None):
        key = _CONF + "emitter.reportReadOnlyActions"
        values["report_read_only_actions"] = _flag(read_only, key)
    if interval := pick("running_interval", "emitter.runningIntervalSeconds", None):
        key = _CONF + "emitter.runningIntervalSeconds"
        values["running_interval"] = _number(interval, key, float)
    if dataset_level := pick(
        "dataset_lineage_enabled", "columnLineage.datasetLineageEnabled", None
    ):
        key = _CONF + "columnLineage.datasetLineageEnabled"
        values["dataset_lineage_enabled"] = _flag(dataset_level, key)
    if drain := pick("drain_timeout", "emitter.drainTimeoutSeconds", None):
        values["drain_timeout"] = _number(drain, _CONF + "emitter.drainTimeoutSeconds", float)

    parent = [values.get(k) for k in ("parent_namespace", "parent_name", "parent_run_id")]
    if any(parent) and not all(parent):
        raise ConfigurationError(
            f"{_CONF}parentJobNamespace, parentJobName and parentRunId go together"
        )
    return EmitterConfig(url=values.pop("url", None), **values)
