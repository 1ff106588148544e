"""The ``consumers:`` section of config.yaml: one entry per daemon, keyed by its name.

Loaded by :mod:`proxy.config` (which gives errors their file and line); every model here
forbids unknown keys. A daemon reads ``topics`` (default: ``kafka.topic``) in consumer
group ``group_id`` (default ``lineage-proxy.<name>``) and delivers to ``target``, whose
``kind`` picks the adapter: http, marquez, egeria, datahub, archive, kafka.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator

from proxy.destinations.config import (
    ArchiveDestinationConfig,
    DestinationConfig,
    HttpDestinationConfig,
    KafkaDestinationConfig,
)
from proxy.destinations.http.targets import HttpTargetConfig
from proxy.destinations.retry_config import BreakerConfig, RetryConfig
from proxy.strict import StrictModel

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
    HttpTargetConfig | ArchiveDestinationConfig | KafkaDestinationConfig,
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

    session_timeout_ms: Annotated[int, Field(ge=1000)] = 45_000
    heartbeat_interval_ms: Annotated[int, Field(ge=100)] = 3_000
    # A member that does not poll for this long leaves the group (its partitions move).
    max_poll_interval_ms: Annotated[int, Field(ge=1000)] = 300_000
    # Where a new group starts: the oldest retained event, or only new ones.
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    # Other librdkafka consumer settings, passed through (security.protocol, sasl.*, ...).
    settings: dict[str, KafkaSetting] = Field(default_factory=dict)


class DeadLetterConfig(StrictModel):
    enabled: bool = True
    # Where refused and poison messages go; "{topic}" is the source topic.
    topic: str = "{topic}.dlq"


class DedupeConfig(StrictModel):
    """Skip events already delivered (run id + event type + event time + job).

    In memory the cache holds within one process. With ``journal`` it is also appended to
    that file and reloaded at start, so it survives a crash of the process (not a lost
    disk); give every daemon process its own journal.
    """

    enabled: bool = False
    max_entries: Annotated[int, Field(ge=1)] = 100_000
    journal: Path | None = None


class ConsumerConfig(StrictModel):
    target: Annotated[ConsumerTarget, BeforeValidator(_http_target_directly)]
    # Topics to read; null means the proxy's kafka.topic.
    topics: list[str] | None = None
    # Consumer group; null means "lineage-proxy.<name>". Same group → partitions are shared.
    group_id: str | None = None
    # Deliveries in flight at once, across partitions and run keys (order holds per key).
    concurrency: Annotated[int, Field(ge=1)] = 16
    # Messages fetched and waiting for delivery (and their bytes) before fetching pauses,
    # until half are taken; librdkafka's own prefetch is capped apart (8 MiB, see
    # consumers/kafka_source.py; group.settings may change it).
    max_buffered: Annotated[int, Field(ge=2)] = 10_000
    max_buffered_bytes: Annotated[int, Field(ge=1024)] = 16 * 1024 * 1024
    # How often delivered offsets are committed (also on rebalance and shutdown).
    commit_interval_seconds: Annotated[float, Field(gt=0)] = 1.0
    # SIGTERM waits this long for in-flight deliveries before committing and leaving.
    shutdown_timeout_seconds: Annotated[float, Field(gt=0)] = 30.0
    group: GroupConfig = Field(default_factory=GroupConfig)
    dead_letter: DeadLetterConfig = Field(default_factory=DeadLetterConfig)
    dedupe: DedupeConfig = Field(default_factory=DedupeConfig)
    circuit_breaker: BreakerConfig = Field(default_factory=BreakerConfig)
    # /metrics and /healthz of this daemon; null: no status server.
    status_host: str = "127.0.0.1"
    status_port: Annotated[int, Field(ge=0, le=65535)] | None = None

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
        """Relative file paths (dedupe journal, archive directory) resolved against the
        config file's folder."""
        config = self
        journal = config.dedupe.journal
        if journal is not None and not journal.is_absolute():
            dedupe = config.dedupe.model_copy(update={"journal": base / journal})
            config = config.model_copy(update={"dedupe": dedupe})
        target = config.target
        if isinstance(target, ArchiveDestinationConfig) and not target.directory.is_absolute():
            target = target.model_copy(update={"directory": base / target.directory})
            config = config.model_copy(update={"target": target})
        return config

    def destination(self) -> DestinationConfig:
        """The target as the one destination config union that
        :func:`~proxy.destinations.registry.build_destination` builds."""
        target = self.target
        if isinstance(target, ArchiveDestinationConfig | KafkaDestinationConfig):
            return target
        return HttpDestinationConfig(kind="http", target=target, required=True)
