"""The emitter's settings, from ``enable_lineage`` arguments, Spark conf and environment.

Precedence: explicit arguments, then Spark conf keys (named like the official
openlineage-spark integration's, so one ``spark-submit --conf`` set serves both), then
the environment, then defaults.

Where events go is a transport of the official openlineage-python client
(:mod:`.delivery`). ``spark.openlineage.transport.*`` is mapped onto that client's
transport configuration (:func:`spark_transport`); with none set (and no ``url`` argument)
the client resolves it itself: ``openlineage.yml`` (``OPENLINEAGE_CONFIG``, the working
directory, ``~/.openlineage``), ``OPENLINEAGE__TRANSPORT__*``, ``OPENLINEAGE_URL`` /
``OPENLINEAGE_ENDPOINT`` / ``OPENLINEAGE_API_KEY``.

| setting | Spark conf | environment |
|---|---|---|
| transport | spark.openlineage.transport.* (``_SETTINGS``, ``_MAPS``) | the client's, above |
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
| disk buffer on/off | spark.openlineage.emitter.buffer.enabled (default true) | — |
| buffer directory | spark.openlineage.emitter.buffer.directory | OPENLINEAGE_SPARK_BUFFER_DIR |
| disk buffer bound (bytes) | spark.openlineage.emitter.buffer.maxBytes (default 100 MiB) | — |
| buffer retry (s) | spark.openlineage.emitter.buffer.retryIntervalSeconds (default 5) | — |

Events the transport cannot deliver wait in the disk buffer (:mod:`spark_emitter.buffer`)
and are sent when it can again, in this application or at the next one's start; the
default directory is ``~/.cache/spark_emitter/buffer``.

Read-only actions (``count()``, ``collect()``: a plan with no output) are not reported by
default, as the official integration filters them; ``reportReadOnlyActions=true`` reports
them as jobs of their own (``<app>.adaptive_spark_plan`` and the like).

An action's RUNNING events follow its Spark jobs' starts and ends, at most one per
``runningIntervalSeconds`` (default 10) per action, so an action of a thousand small Spark
jobs does not send a thousand events.

Column lineage has the official integration's default shape (1.53: its
``columnLineage.datasetLineageEnabled`` defaults to true): the columns a filter, join,
grouping or sort depends on are listed once, in the facet's ``dataset`` field (as INDIRECT
transformations). ``columnLineage.datasetLineageEnabled=false`` (the official option of the
same name) lists them among every output field's ``inputFields`` instead, the older shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ConfigurationError", "EmitterConfig", "resolve_config", "spark_transport"]

_CONF = "spark.openlineage."


class ConfigurationError(ValueError):
    """A setting has a value the emitter cannot use; the message names the key."""


@dataclass(frozen=True)
class EmitterConfig:
    # The client's transport configuration; None: the client resolves its own.
    transport: dict[str, Any] | None = None
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
    dataset_lineage_enabled: bool = True
    buffer_enabled: bool = True
    # None: spark_emitter.buffer.default_buffer_directory()
    buffer_directory: str | None = None
    buffer_max_bytes: int = 100 * 1024 * 1024
    buffer_retry_interval: float = 5.0


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

    values["transport"] = _transport_with_arguments(spark_transport(spark_conf), overrides)
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

    if enabled := spark_conf.get(_CONF + "emitter.buffer.enabled"):
        values["buffer_enabled"] = _flag(enabled, _CONF + "emitter.buffer.enabled")
    if directory := pick(
        "buffer_directory", "emitter.buffer.directory", "OPENLINEAGE_SPARK_BUFFER_DIR"
    ):
        values["buffer_directory"] = directory
    if size := spark_conf.get(_CONF + "emitter.buffer.maxBytes"):
        values["buffer_max_bytes"] = _number(size, _CONF + "emitter.buffer.maxBytes", int)
    if retry := spark_conf.get(_CONF + "emitter.buffer.retryIntervalSeconds"):
        key = _CONF + "emitter.buffer.retryIntervalSeconds"
        values["buffer_retry_interval"] = _number(retry, key, float)

    parent = [values.get(k) for k in ("parent_namespace", "parent_name", "parent_run_id")]
    if any(parent) and not all(parent):
        raise ConfigurationError(
            f"{_CONF}parentJobNamespace, parentJobName and parentRunId go together"
        )
    return EmitterConfig(**values)


def _transport_with_arguments(
    transport: dict[str, Any] | None, overrides: Mapping[str, Any]
) -> dict[str, Any] | None:
    """``enable_lineage``'s ``url``, ``endpoint``, ``api_key`` and ``timeout`` arguments,
    over an http transport from Spark conf (or making one)."""
    names = ("url", "endpoint", "api_key", "timeout")
    given = {k: overrides[k] for k in names if overrides.get(k) is not None}
    if not given:
        return transport
    if "url" in given and (transport is None or transport["type"] != "http"):
        transport = {"type": "http"}
    if transport is None or transport["type"] != "http":
        raise ConfigurationError(
            f"{', '.join(given)}: settings of an http transport, which needs a url "
            f"(the url argument or {_TRANSPORT}url)"
        )
    transport = dict(transport)
    if "url" in given:
        transport["url"] = str(given["url"])
    if "endpoint" in given:
        transport["endpoint"] = str(given["endpoint"])
    if "api_key" in given:
        transport["auth"] = {"type": "api_key", "apiKey": str(given["api_key"])}
    if "timeout" in given:
        transport["timeout"] = _number(str(given["timeout"]), "timeout", float)
    return transport


# ---- spark.openlineage.transport.* → the openlineage-python client's transport config ----

_TRANSPORT = _CONF + "transport."
_Convert = Callable[[str, str], Any]


def _text(value: str, _key: str) -> str:
    return value


def _millis_as_seconds(value: str, key: str) -> float:
    return float(_number(value, key, float)) / 1000


def _json_or_text(value: str, _key: str) -> Any:
    """Numbers, lists and flags as JSON, the rest as text: what the client does with its
    ``OPENLINEAGE__TRANSPORT__*`` environment variables."""
    try:
        return json.loads(value)
    except ValueError:
        return value


# Per transport type: Spark conf name (after the transport prefix) → the client's key.
# The Spark names are the official Java integration's; the client's differ in places
# (topicName → topic, location → log_file_path, timeoutInMillis → timeout in seconds).
_SETTINGS: dict[str, dict[str, tuple[str, _Convert]]] = {
    "http": {
        "url": ("url", _text),
        "endpoint": ("endpoint", _text),
        "timeoutInMillis": ("timeout", _millis_as_seconds),
        "compression": ("compression", _text),
    },
    "kafka": {
        "topicName": ("topic", _text),
        "messageKey": ("messageKey", _text),
        "flush": ("flush", _flag),
    },
    "file": {"location": ("log_file_path", _text)},
    "console": {},
    "composite": {
        "continueOnFailure": ("continue_on_failure", _flag),
        "continueOnSuccess": ("continue_on_success", _flag),
    },
}
# Prefixes whose rest is one key of a map (Kafka producer properties keep their dots).
_MAPS: dict[str, dict[str, tuple[str, _Convert]]] = {
    "http": {
        "auth.": ("auth", _text),
        "headers.": ("custom_headers", _text),
        "retry.": ("retry", _json_or_text),  # urllib3 Retry arguments, the client's
    },
    "kafka": {"properties.": ("config", _text)},
}
# What each type cannot do without: the client's key and the Spark conf name for it.
_REQUIRED: dict[str, dict[str, str]] = {
    "http": {"url": "url"},
    "kafka": {"topic": "topicName", "config": "properties.bootstrap.servers"},
    "file": {"log_file_path": "location"},
}


def spark_transport(conf: Mapping[str, str], prefix: str = _TRANSPORT) -> dict[str, Any] | None:
    """The client's transport configuration from the Spark conf keys under ``prefix``, or
    None when there are none. ``type`` is one of ``_SETTINGS`` (http when left out and a
    ``url`` is set); a composite's children are ``transports.<name>.*``. An unknown type
    or key is an error naming the Spark conf key, not a transport that silently differs."""
    keys = {k[len(prefix) :]: v for k, v in conf.items() if k.startswith(prefix)}
    if not keys:
        return None
    kind = keys.pop("type", "http" if "url" in keys else "").strip().lower()
    if kind not in _SETTINGS:
        raise ConfigurationError(
            f"{prefix}type: {'unknown transport ' + repr(kind) if kind else 'not set'}, "
            f"expected one of {', '.join(sorted(_SETTINGS))}"
        )
    transport: dict[str, Any] = {"type": kind}
    if kind == "composite":
        names = sorted({k.split(".")[1] for k in keys if k.startswith("transports.")})
        children = {name: spark_transport(conf, f"{prefix}transports.{name}.") for name in names}
        if not children:
            raise ConfigurationError(f"{prefix}transports.<name>.type: a composite needs one")
        transport["transports"] = children
        keys = {k: v for k, v in keys.items() if not k.startswith("transports.")}
    for key, value in keys.items():
        _set(transport, kind, key, value, prefix)
    for needed, spark_name in _REQUIRED.get(kind, {}).items():
        if needed not in transport:
            raise ConfigurationError(f"{prefix}{spark_name}: required by the {kind} transport")
    if "auth" in transport:
        transport["auth"].setdefault("type", "api_key")
    if kind == "file":
        transport["append"] = True  # one file, an event a line, as the official writes it
    return transport


def _set(transport: dict[str, Any], kind: str, key: str, value: str, prefix: str) -> None:
    if key in _SETTINGS[kind]:
        name, convert = _SETTINGS[kind][key]
        transport[name] = convert(value, prefix + key)
        return
    for start, (name, convert) in _MAPS.get(kind, {}).items():
        if key.startswith(start) and len(key) > len(start):
            transport.setdefault(name, {})[key[len(start) :]] = convert(value, prefix + key)
            return
    known = [*_SETTINGS[kind], *(f"{start}*" for start in _MAPS.get(kind, {}))]
    raise ConfigurationError(
        f"{prefix}{key}: not a setting of the {kind} transport"
        + (f" (known: {', '.join(known)})" if known else "")
    )
