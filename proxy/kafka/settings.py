"""The ``kafka:`` section of config.yaml and the rules every producer's settings obey.

Pure configuration (no librdkafka): the proxy's producers, the consumers and the Kafka
destination kind (:mod:`proxy.destinations.kafka.config`) read their settings from here,
and the durability a 2xx promises is enforced here, once, for all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from proxy.support.secrets import secret_value
from proxy.support.strict import StrictModel

__all__ = [
    "KafkaConfig",
    "MiB",
    "SpoolConfig",
    "check_security_settings",
    "connection_settings",
    "producer_settings",
    "refuse_weaker_durability",
    "resolve_env_settings",
]

MiB = 1024 * 1024

# What makes "2xx means durable" true; user settings may not override these.
_DURABLE = {"acks": "all", "enable.idempotence": True}
_DEFAULTS: dict[str, Any] = {
    "linger.ms": 5,
    "compression.type": "lz4",
    # Answer 503 before openlineage-python's own ~5 s timeout fires, so the client
    # hears "retry" instead of guessing.
    "delivery.timeout.ms": 4000,
    "request.timeout.ms": 3000,
    "socket.keepalive.enable": True,
}


def refuse_weaker_durability(overrides: Mapping[str, Any]) -> None:
    """Raise ValueError when user settings try to weaken acks=all or idempotence."""
    forced = {"acks": ("all", "-1", -1), "enable.idempotence": (True, "true")}
    for key, allowed in forced.items():
        if key in overrides and overrides[key] not in allowed:
            raise ValueError(
                f"producer.{key}={overrides[key]!r} would break the promise that a 2xx "
                "means the event is durable; remove it"
            )


# The settings that say how to reach and authenticate to a cluster: every librdkafka
# client of it (producer, consumer, admin, dead letters, replay) takes them, not only
# the producers they are written under (``kafka.producer``).
_CONNECTION_PREFIXES = ("security.protocol", "sasl.", "ssl.")
# ``sasl.password_env: KAFKA_PASSWORD``: the value of ``sasl.password`` is that variable's.
_ENV_SUFFIX = "_env"


def resolve_env_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with each ``<key>_env: VAR`` replaced by ``<key>: $VAR``, so a secret
    need not sit in config.yaml; ValueError naming the key when VAR is not set."""
    resolved: dict[str, Any] = {}
    for key, value in settings.items():
        if not key.endswith(_ENV_SUFFIX):
            resolved[key] = value
            continue
        try:
            resolved[key.removesuffix(_ENV_SUFFIX)] = secret_value(None, str(value))
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    return resolved


_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")
# Mechanisms that authenticate with a user name and a password.
_PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Files librdkafka reads when the client is created: a missing one fails every client of
# the cluster with an OpenSSL error ("BIO lib") that names no file.
_SECURITY_FILES = (
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.keystore.location",
    "ssl.crl.location",
)


def check_security_settings(settings: Mapping[str, Any]) -> None:
    """Raise ValueError naming the key when the security settings among ``settings``
    (librdkafka's, ``_env`` secrets unresolved) cannot work: an unknown protocol or SASL
    mechanism, a password mechanism without its user name or password, a certificate or
    key file that is not there. Checked at start, so that a typo is one line with the
    file and line of config.yaml rather than an OpenSSL error from every client."""

    def given(key: str) -> bool:
        return key in settings or f"{key}{_ENV_SUFFIX}" in settings

    protocol = str(settings.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in _PROTOCOLS:
        raise ValueError(f"security.protocol: {protocol!r} is none of {', '.join(_PROTOCOLS)}")
    mechanism = str(settings.get("sasl.mechanisms", settings.get("sasl.mechanism", "GSSAPI")))
    if protocol.startswith("SASL_"):
        if mechanism.upper() not in _MECHANISMS:
            raise ValueError(f"sasl.mechanisms: {mechanism!r} is none of {', '.join(_MECHANISMS)}")
        needed = ("sasl.username", "sasl.password")
        missing = [key for key in needed if not given(key)]
        if mechanism.upper() in _PASSWORD_MECHANISMS and missing:
            raise ValueError(
                f"security.protocol {protocol} with {mechanism} needs "
                f"{' and '.join(missing)} (the password may be sasl.password_env: VARIABLE)"
            )
    for key in _SECURITY_FILES:
        value = settings.get(key)
        if value is not None and value != "probe" and not Path(str(value)).exists():
            raise ValueError(f"{key}: {value} does not exist")


def connection_settings(bootstrap_servers: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """What every librdkafka client of a cluster starts from: its bootstrap servers and
    the security settings (``security.protocol``, ``sasl.*``, ``ssl.*``) among
    ``settings``, secrets from the environment resolved."""
    resolved = resolve_env_settings(settings)
    return {
        "bootstrap.servers": bootstrap_servers,
        **{key: value for key, value in resolved.items() if key.startswith(_CONNECTION_PREFIXES)},
    }


def producer_settings(
    bootstrap_servers: str, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """librdkafka settings: our defaults, then the user's, then the durability guarantees."""
    return {
        **_DEFAULTS,
        **connection_settings(bootstrap_servers, overrides or {}),
        **resolve_env_settings(overrides or {}),
        **_DURABLE,
    }


class SpoolConfig(StrictModel):
    """The local write-ahead spool that keeps events through a Kafka outage."""

    # false: no spool — when Kafka cannot confirm, clients get 503 and must resend.
    enabled: bool = True
    # Give each proxy process its own directory. It spools for kafka.bootstrap_servers'
    # cluster in <directory>/default (whatever its address) and for a cluster a rules
    # file names in a subdirectory named after that address.
    directory: Path = Path("var/spool")
    # When the spool holds this much, events Kafka cannot take get 503 + Retry-After.
    max_bytes: Annotated[int, Field(gt=0)] = 1024 * MiB
    # Size of one spool file; a file is deleted once Kafka has all of it.
    segment_bytes: Annotated[int, Field(gt=0)] = 16 * MiB
    # A direct send the broker has not confirmed after this long is spooled (and may then
    # reach Kafka twice); keep it below clients' ~5 s timeout.
    after_seconds: Annotated[float, Field(gt=0)] = 2.5
    # A spool write not fsynced by then answers 503, and while one is stuck new events
    # get 503 at once and /readyz says 503; with after_seconds it stays under clients'
    # ~5 s timeout.
    write_timeout_seconds: Annotated[float, Field(gt=0)] = 2.0


class KafkaConfig(StrictModel):
    """The ``kafka:`` section of config.yaml: the cluster every Kafka destination uses."""

    # "embedded": `serve` starts a Kafka-protocol broker (Tansu) on 127.0.0.1:embedded_port,
    # dev/tests only, with the `embedded` extra installed; `consume`, `dlq` and `replay`
    # reach it there while that `serve` runs. Else host:port[,host:port...] of a cluster.
    bootstrap_servers: str = "embedded"
    # The loopback port of the embedded broker; 0: a free one (then only `serve` itself
    # can reach it).
    embedded_port: Annotated[int, Field(ge=0, le=65535)] = 19092
    # The topic events go to unless a rule says otherwise; consumers read it by default.
    topic: str = "openlineage.events"
    # Create missing topics at start (with the partitions and replication below).
    create_topics: bool = True
    # Partitions of a topic we create; events of one run share a partition.
    topic_partitions: Annotated[int, Field(ge=1)] = 3
    # Replication factor of a topic we create; null: the cluster's default.replication.factor
    # (a cluster with min.insync.replicas=2 refuses acks=all writes to a topic of 1).
    topic_replication_factor: Annotated[int, Field(ge=1)] | None = None
    # librdkafka producer settings, passed through as they are (security.protocol, sasl.*,
    # ssl.*, compression.type, linger.ms ...). Durability settings below cannot be weakened.
    # The security ones reach every client of the cluster (consumers, dead letters, replay);
    # a secret may come from the environment: sasl.password_env: KAFKA_PASSWORD.
    producer: dict[str, str | int | float | bool] = Field(default_factory=dict)
    # Where events wait, fsynced, while Kafka cannot confirm them.
    spool: SpoolConfig = Field(default_factory=SpoolConfig)

    @field_validator("producer")
    @classmethod
    def _security_that_can_work(
        cls, producer: dict[str, str | int | float | bool]
    ) -> dict[str, str | int | float | bool]:
        check_security_settings(producer)
        return producer

    @model_validator(mode="after")
    def _durability_is_not_negotiable(self) -> KafkaConfig:
        refuse_weaker_durability(self.producer)
        try:
            resolve_env_settings(self.producer)  # a variable not set fails the start
        except ValueError as exc:
            raise ValueError(f"producer.{exc}") from None
        return self
