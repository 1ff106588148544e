"""The proxy's typed configuration: config.yaml, then ``LINEAGE_PROXY__*`` overrides.

Every section is a pydantic model with ``extra="forbid"`` so that a misspelled key fails
at start with the file, line and key instead of being silently ignored. Environment
variables named ``LINEAGE_PROXY__<SECTION>__<KEY>`` (any depth) override the file; their
values are read as YAML scalars, so ``5055`` is a number and ``[a, b]`` a list.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, ValidationError, field_validator, model_validator

from consumers.config import ConsumerConfig
from proxy.auth.config import AuthConfig, TokenConfig
from proxy.kafka.settings import KafkaConfig, SpoolConfig
from proxy.support.queued_bytes import DEFAULT_MAX_QUEUED_BYTES
from proxy.support.strict import StrictModel
from proxy.support.tls import TlsConfig
from proxy.support.yaml_source import (
    ConfigError,
    YamlDocument,
    format_validation_error,
    load_yaml_document,
    set_path,
)
from proxy.validation.repairs import REPAIR_NAMES, NaiveTimeZones, RepairName

__all__ = [
    "ENV_PREFIX",
    "AuthConfig",
    "ConfigError",
    "ConsumerConfig",
    "KafkaConfig",
    "LoggingConfig",
    "ProxyConfig",
    "RoutingConfig",
    "ServerConfig",
    "SpoolConfig",
    "TlsConfig",
    "TokenConfig",
    "ValidationConfig",
    "load_config",
]

ENV_PREFIX = "LINEAGE_PROXY__"
MiB = 1024 * 1024


class ServerConfig(StrictModel):
    # Address to listen on; 0.0.0.0 for every interface (in a container).
    host: str = "127.0.0.1"
    # Port to listen on; 0 picks a free one (logged at start).
    port: Annotated[int, Field(ge=0, le=65535)] = 5000
    # HTTPS on the listener (proxy/support/tls.py); null: plain HTTP. The files are re-read on
    # SIGHUP and when they change.
    tls: TlsConfig | None = None
    # Largest request body as sent (compressed size); larger gets 413.
    max_body_bytes: Annotated[int, Field(gt=0)] = 5 * MiB
    # gzip bodies: limits on what they inflate to, absolute and as a ratio (gzip bombs).
    max_decompressed_bytes: Annotated[int, Field(gt=0)] = 50 * MiB
    # Largest inflated:compressed ratio, judged above 1 MiB inflated (gzip bombs).
    max_gzip_ratio: Annotated[float, Field(gt=1)] = 200.0
    # Request bytes this process holds at once, over every connection: bodies as read
    # plus what gzip/deflate bodies inflate to, held until each request is answered.
    # Past it a request gets 503 + Retry-After (413 if it alone needs more). The events
    # parsed from those bytes take a few times as much again (docs/operate/ingest-limits.md).
    max_bytes_in_flight: Annotated[int, Field(gt=0)] = 128 * MiB
    # Bytes of events the process holds in queues nobody waits on: each tap reader's,
    # the tap's outboxes to other workers, best-effort deliveries (queued or being
    # sent). An event counts its JSON size; one that does not fit is dropped for that
    # queue and counted, and a tap reader that read nothing for 10 s then is cut off.
    # Held as objects the events take up to about twice this (docs/operate/ingest-limits.md).
    max_queued_bytes: Annotated[int, Field(gt=0)] = DEFAULT_MAX_QUEUED_BYTES
    # Most events in one /api/v1/lineage/batch request; more gets 413.
    max_batch_events: Annotated[int, Field(gt=0)] = 10_000
    # How long SIGTERM waits for in-flight deliveries before the process exits.
    shutdown_timeout_seconds: Annotated[float, Field(gt=0)] = 30.0
    # Seconds the client is told to wait (Retry-After) when Kafka could not take an event.
    retry_after_seconds: Annotated[int, Field(ge=1)] = 5
    # Consumer daemons (names under `consumers:`) that `serve` runs in the same process.
    run_consumers: list[str] = Field(default_factory=list)
    # Misbehaving clients (slowloris, idle floods) must not hold the proxy's connections:
    # a request's header must be complete this long after its first byte (or after the
    # connection opened) ...
    header_timeout_seconds: Annotated[float, Field(gt=0)] = 10.0
    # ... its body this long after the header ...
    body_timeout_seconds: Annotated[float, Field(gt=0)] = 60.0
    # ... and an idle keep-alive connection is closed after this long. Keep it above the
    # idle timeout of any load balancer in front (60 s on common ones).
    keepalive_timeout_seconds: Annotated[float, Field(gt=0)] = 75.0
    # Open connections at most; beyond it a new connection gets 503 and is closed.
    # Lowered at start to what the process's open-file limit allows.
    max_connections: Annotated[int, Field(gt=0)] = 10_000
    # The status page (GET / and /ui) and its JSON (GET /api/v1/status); when auth is on,
    # the JSON needs a valid token. false: none of the three routes exist.
    status_page: bool = True
    # The live tap of accepted events (GET /api/v1/tap, `lineage-proxy tap`); with auth on,
    # a token sees its namespaces only. false: the route does not exist.
    tap: bool = True
    # Worker processes serving the port together (SO_REUSEPORT), each with its own event
    # loop and Kafka producer; "auto": one per CPU core. max_connections is per worker.
    workers: Annotated[int, Field(ge=1, le=256)] | Literal["auto"] = 1
    # The event loop `serve` and `consume` run on: uvloop (libuv; about 20% less CPU per
    # request than the standard loop: docs/contributing/benchmark-history.md) or asyncio.
    event_loop: Literal["uvloop", "asyncio"] = "uvloop"

    def worker_count(self) -> int:
        """``workers`` as a number: "auto" is the cores this process may run on."""
        if self.workers != "auto":
            return self.workers
        return len(os.sched_getaffinity(0))


def _check_zone(zone: str) -> str:
    try:
        ZoneInfo(zone)
    except (ValueError, ZoneInfoNotFoundError):
        raise ValueError(
            f"unknown time zone {zone!r}; use an IANA name such as Europe/Berlin"
        ) from None
    return zone


class ValidationConfig(StrictModel):
    # repair: events that break the spec only in the ways listed in `repairs` are repaired,
    # forwarded and counted (proxy/validation/repairs.py). strict: the spec as written —
    # no repairs, and facets whose _schemaURL points at no known schema are rejected.
    mode: Literal["repair", "strict"] = "repair"
    # The same as mode: strict (the older spelling, kept so existing configs still mean
    # what they meant).
    strict: bool = False
    # Which repairs are on in mode: repair; [] turns them all off.
    repairs: list[RepairName] = Field(default_factory=lambda: list(REPAIR_NAMES))
    # Directory of extra facet JSON Schemas (*.json) registered next to the spec's own.
    extra_schema_dir: Path | None = None
    # The time zone (IANA name, e.g. Europe/Berlin) a date-time without a UTC offset is
    # read in by the naive_date_time repair; its offset at that time is appended.
    naive_time_zone: str = "UTC"
    # Per producer URI prefix, the zone for that producer's naive date-times instead
    # (the longest matching prefix wins), e.g. {"https://github.com/dbt-labs": "Asia/Tokyo"}.
    naive_time_zones_by_producer: dict[str, str] = Field(default_factory=dict)

    @field_validator("naive_time_zone")
    @classmethod
    def _known_zone(cls, zone: str) -> str:
        return _check_zone(zone)

    @field_validator("naive_time_zones_by_producer")
    @classmethod
    def _known_zones(cls, zones: dict[str, str]) -> dict[str, str]:
        for zone in zones.values():
            _check_zone(zone)
        return zones

    def naive_time_zones(self) -> NaiveTimeZones:
        """What the naive_date_time repair reads naive date-times in."""
        return NaiveTimeZones(self.naive_time_zone, self.naive_time_zones_by_producer)

    @property
    def is_strict(self) -> bool:
        return self.strict or self.mode == "strict"

    def enabled_repairs(self) -> tuple[RepairName, ...]:
        """The repairs to apply: none in strict mode."""
        return () if self.is_strict else tuple(dict.fromkeys(self.repairs))


class RoutingConfig(StrictModel):
    # The rules file (routing_rules/ docs); None: the built-in routing_rules/default.yaml.
    rules: Path | None = None
    # Archive destinations with a relative directory are placed under this one.
    archive_root: Path = Path("var/archive")
    # How often the rules file's mtime is checked for hot reload; 0 turns watching off
    # (SIGHUP still reloads).
    reload_interval_seconds: Annotated[float, Field(ge=0)] = 2.0
    # Best-effort destinations (http without required: true) are delivered off the
    # request path from a bounded queue; when it is full, events for them are dropped
    # and counted rather than slowing clients down. Its bytes count against
    # server.max_queued_bytes too.
    best_effort_queue_size: Annotated[int, Field(gt=0)] = 10_000
    # Best-effort deliveries in flight at once.
    best_effort_concurrency: Annotated[int, Field(gt=0)] = 16


class LoggingConfig(StrictModel):
    # Least severe level logged (to stderr).
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # One JSON object per line (ts, level, logger, message) instead of plain text.
    json_format: bool = False


class ProxyConfig(StrictModel):
    # The HTTP listener and its limits.
    server: ServerConfig = Field(default_factory=ServerConfig)
    # The Kafka cluster, its topic and producer settings, and the outage spool.
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
    # How events are checked against the OpenLineage spec.
    validation: ValidationConfig = Field(default_factory=ValidationConfig)
    # Bearer tokens and the namespaces each may post for.
    auth: AuthConfig = Field(default_factory=AuthConfig)
    # The rules file and where archive destinations write.
    routing: RoutingConfig = Field(default_factory=RoutingConfig)
    # Log level and format.
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    # Consumer daemons by name: `lineage-proxy consume NAME` (see consumers/config.py).
    consumers: dict[str, ConsumerConfig] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _run_consumers_exist(self) -> ProxyConfig:
        unknown = [n for n in self.server.run_consumers if n not in self.consumers]
        if unknown:
            raise ValueError(f"server.run_consumers names unknown consumers: {unknown}")
        return self


def _apply_env_overrides(doc: YamlDocument, environ: Mapping[str, str]) -> None:
    import yaml

    if not isinstance(doc.data, dict):
        return
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        path = tuple(part.lower() for part in name[len(ENV_PREFIX) :].split("__") if part)
        if not path:
            continue
        try:
            value = yaml.safe_load(raw) if raw.strip() else raw
        except yaml.YAMLError:
            value = raw
        set_path(doc.data, path, value)
        doc.overrides[path] = name


def load_config(path: Path | str | None, environ: Mapping[str, str] | None = None) -> ProxyConfig:
    """Read and validate the config; raise :class:`ConfigError` naming file, line and key.

    ``path=None`` means built-in defaults plus the environment. Relative paths inside the
    file (schema dirs, rules, archive) are resolved against the file's directory so that
    the proxy behaves the same whatever the working directory.
    """
    if path is None:
        doc = YamlDocument(data={}, source="(defaults)")
    else:
        doc = load_yaml_document(path)
        if not isinstance(doc.data, dict):
            raise ConfigError(f"{doc.source}:1: the top level must be a mapping of sections")
    _apply_env_overrides(doc, os.environ if environ is None else environ)
    try:
        config = ProxyConfig.model_validate(doc.data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(doc, exc, ProxyConfig)) from None
    return _resolve_relative_paths(config, Path(path).parent if path else Path.cwd())


def _resolve_relative_paths(config: ProxyConfig, base: Path) -> ProxyConfig:
    extra = config.validation.extra_schema_dir
    if extra is not None and not extra.is_absolute():
        validation = config.validation.model_copy(update={"extra_schema_dir": base / extra})
        config = config.model_copy(update={"validation": validation})
    if config.server.tls is not None:
        server = config.server.model_copy(update={"tls": config.server.tls.under(base)})
        config = config.model_copy(update={"server": server})
    consumers = {name: c.with_paths_under(base) for name, c in config.consumers.items()}
    config = config.model_copy(update={"consumers": consumers})
    spool = config.kafka.spool
    if not spool.directory.is_absolute():
        kafka = config.kafka.model_copy(
            update={"spool": spool.model_copy(update={"directory": base / spool.directory})}
        )
        config = config.model_copy(update={"kafka": kafka})
    routing = config.routing
    updates = {
        key: base / value
        for key, value in (("rules", routing.rules), ("archive_root", routing.archive_root))
        if value is not None and not value.is_absolute()
    }
    if updates:
        config = config.model_copy(update={"routing": routing.model_copy(update=updates)})
    return config
