"""The ``consumers:`` section of config.yaml: one entry per daemon, keyed by its name.

Loaded by :mod:`proxy.config.settings` (which gives errors their file and line); every model here
forbids unknown keys. A daemon reads ``topics`` (default: ``kafka.topic``) in consumer
group ``group_id`` (default ``lineage-proxy.<name>``) and delivers to ``target``, whose
``kind`` picks the adapter: http, marquez, egeria, datahub, archive, kafka.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator

from proxy.destinations.archive.config import ArchiveDestinationConfig
from proxy.destinations.http.config import HttpDestinationConfig
from proxy.destinations.http.targets import HttpTargetConfig
from proxy.destinations.kafka.config import KafkaDestinationConfig
from proxy.destinations.kinds import DestinationConfig
from proxy.destinations.object_archive.config import ObjectArchiveDestinationConfig
from proxy.destinations.retry_config import BreakerConfig, RetryConfig
from proxy.support.strict import StrictModel
from proxy.support.tls import TlsConfig

__all__ = [
    "BreakerConfig",
    "ConsumerConfig",
    "ConsumerTarget",
    "DeadLetterConfig",
    "DedupeConfig",
    "GroupConfig",
]

KafkaSetting = str | int | float | bool


# A consumer's ``target`` is a destination config (proxy/destinations/config.py), with one
# spelling kept from before routes and consumers shared it: an HTTP target is written
# directly (``{kind: marquez, url: ...}``), not inside ``{kind: http, target: {...}}`` as in
# a rules file. The rules-file spelling is accepted too (see :func:`_http_target_directly`).
ConsumerTarget = Annotated[
    HttpTargetConfig
    | ArchiveDestinationConfig
    | ObjectArchiveDestinationConfig
    | KafkaDestinationConfig,
    Field(discriminator="kind"),
]


def _http_target_directly(value: Any) -> Any:
    """``{kind: http, target: {...}}`` (the rules-file spelling) → the target itself; a
    consumer always waits for its target, so ``required`` may only be true."""
    if isinstance(value, dict) and value.get("kind") == "http" and "target" in value:
        extra = set(value) - {"kind", "target", "required"}
        if extra or value.get("required", True) is not True:
            raise ValueError("an http target in a consumer takes only target (and required: true)")
        return value["target"]
    return value


class GroupConfig(StrictModel):
    """Consumer-group settings. Defaults suit production; tests shorten the timeouts."""

    # A member not heard from for this long is dropped from the group.
    session_timeout_ms: Annotated[int, Field(ge=1000)] = 45_000
    # How often a member tells the group it is alive (well below session_timeout_ms).
    heartbeat_interval_ms: Annotated[int, Field(ge=100)] = 3_000
    # A member that does not poll for this long leaves the group (its partitions move).
    max_poll_interval_ms: Annotated[int, Field(ge=1000)] = 300_000
    # Where a new group starts: the oldest retained event, or only new ones.
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    # Other librdkafka consumer settings, passed through (security.protocol, sasl.*, ...).
    settings: dict[str, KafkaSetting] = Field(default_factory=dict)


class DeadLetterConfig(StrictModel):
    # Send events the target refuses (and unparsable messages) to the dead-letter topic
    # with the reason.
    enabled: bool = True
    # Where refused and poison messages go; "{topic}" is the source topic.
    topic: str = "{topic}.dlq"
    # An event the target keeps failing retriably (5xx, timeout) while it takes other
    # events is dead-lettered after this many such failures (docs/consumers/dlq.md);
    # failures while the target takes nothing never count. At least 2: at the instant a
    # target comes back, one failure answered just before may look like one. null: retry
    # until delivered.
    attempts_while_target_up: Annotated[int, Field(ge=2)] | None = 10


class DedupeConfig(StrictModel):
    """Skip events already delivered (run id + event type + event time + job).

    In memory the cache holds within one process. With ``journal`` it is also appended to
    that file and reloaded at start, so it survives a crash of the process (not a lost
    disk); give every daemon process its own journal.
    """

    # Skip an event already delivered (helps targets without idempotency, like Marquez).
    enabled: bool = False
    # Events remembered; the least recently seen are forgotten beyond this.
    max_entries: Annotated[int, Field(ge=1)] = 100_000
    # File the cache is appended to and reloaded from at start; null: memory only.
    journal: Path | None = None


class ConsumerConfig(StrictModel):
    # Where events go; kind: http, marquez, egeria, datahub, archive, object_archive
    # or kafka.
    target: Annotated[ConsumerTarget, BeforeValidator(_http_target_directly)]
    # Topics to read; null means the proxy's kafka.topic.
    topics: list[str] | None = None
    # Consumer group; null means "lineage-proxy.<name>". Same group → partitions are shared.
    group_id: str | None = None
    # Deliveries in flight at once, across partitions and run keys (order holds per key).
    concurrency: Annotated[int, Field(ge=1)] = 16
    # The order events reach the target in. "acknowledged": the order the proxy took them,
    # across runs and partitions; events naming the same run, job, dataset or new
    # namespace go one after another, the rest side by side (what Marquez needs: its graph
    # follows arrival order). "run": in order within each run, runs side by side (the
    # fastest). null: the target's default (marquez: acknowledged; the others: run).
    ordering: Literal["acknowledged", "run"] | None = None
    # With ordering acknowledged: how long an event waits for a partition with nothing
    # newer before it goes anyway (the bound on how late an earlier event may come).
    reorder_window_seconds: Annotated[float, Field(ge=0, le=60)] = 0.5
    # Events fetched and waiting for delivery, at most: fetching waits at the bound (and
    # pauses if it lasts), until half are taken.
    max_buffered: Annotated[int, Field(ge=2)] = 10_000
    # The same bound in bytes of those events. librdkafka's own read-ahead is capped apart
    # (8 MiB; group.settings may change it).
    max_buffered_bytes: Annotated[int, Field(ge=1024)] = 16 * 1024 * 1024
    # The shortest time between two commits: a delivery is committed as soon as this
    # much passed since the last commit (also on rebalance and shutdown). What a crash
    # re-sends is what was delivered within it.
    commit_interval_seconds: Annotated[float, Field(gt=0)] = 0.05
    # SIGTERM waits this long for in-flight deliveries before committing and leaving.
    shutdown_timeout_seconds: Annotated[float, Field(gt=0)] = 30.0
    # Consumer-group timeouts, start offset and librdkafka settings.
    group: GroupConfig = Field(default_factory=GroupConfig)
    # Where refused events go.
    dead_letter: DeadLetterConfig = Field(default_factory=DeadLetterConfig)
    # Skipping events already delivered.
    dedupe: DedupeConfig = Field(default_factory=DedupeConfig)
    # When a failing target's circuit opens and how it is probed.
    circuit_breaker: BreakerConfig = Field(default_factory=BreakerConfig)
    # /metrics and /healthz of this daemon; null: no status server.
    status_host: str = "127.0.0.1"
    # Port of the status server (/metrics, /healthz); null: none.
    status_port: Annotated[int, Field(ge=0, le=65535)] | None = None
    # HTTPS on the status port, the same keys as server.tls; null: plain HTTP.
    status_tls: TlsConfig | None = None

    @field_validator("target")
    @classmethod
    def _retry_until_delivered(cls, target: ConsumerTarget) -> ConsumerTarget:
        """A consumer retries a retriable failure until the target is back (the DLQ is for
        events the target refuses): its ``max_attempts`` is null, never a number."""
        if isinstance(target, KafkaDestinationConfig) and target.topic is None:
            raise ValueError("topic: a consumer's kafka target needs the topic to write to")
        retry = target.retry or RetryConfig()
        if retry.max_attempts is not None and "max_attempts" in retry.model_fields_set:
            raise ValueError(
                "retry.max_attempts: a consumer never gives up on a retriable failure "
                "(it waits for the target; only refused events are dead-lettered); remove it"
            )
        return target.model_copy(update={"retry": retry.until_delivered()})

    def with_paths_under(self, base: Path) -> ConsumerConfig:
        """Relative file paths (dedupe journal, archive directory, status TLS files)
        resolved against the config file's folder."""
        config = self
        if config.status_tls is not None:
            config = config.model_copy(update={"status_tls": config.status_tls.under(base)})
        journal = config.dedupe.journal
        if journal is not None and not journal.is_absolute():
            dedupe = config.dedupe.model_copy(update={"journal": base / journal})
            config = config.model_copy(update={"dedupe": dedupe})
        target = config.target
        if isinstance(target, ArchiveDestinationConfig) and not target.directory.is_absolute():
            target = target.model_copy(update={"directory": base / target.directory})
            config = config.model_copy(update={"target": target})
        return config

    def delivery_order(self) -> Literal["acknowledged", "run"]:
        """``ordering``, or the target's default when it is null."""
        if self.ordering is not None:
            return self.ordering
        sensitive = getattr(self.target, "order_sensitive", False)
        return "acknowledged" if sensitive else "run"

    def destination(self) -> DestinationConfig:
        """The target as the one destination config union that
        :func:`~proxy.destinations.registry.build_destination` builds."""
        target = self.target
        if isinstance(
            target,
            ArchiveDestinationConfig | ObjectArchiveDestinationConfig | KafkaDestinationConfig,
        ):
            return target
        return HttpDestinationConfig(kind="http", target=target, required=True)
