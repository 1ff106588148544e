"""What a destination is configured with, for every kind: the one config union.

A rules file's ``destinations:`` and a consumer's ``target:`` are both read with these
models; ``kind`` picks the class (an unknown kind or key is a load error with file and
line). This module is pure configuration — importing it loads neither aiohttp,
librdkafka nor the archive writer — so the rule language and config loading can use it
without starting anything. Turning a config into a live destination is
:mod:`proxy.destinations.registry`'s job.

The Kafka settings of config.yaml (``kafka:``) and the durability rules every producer
obeys live here too: they are what a Kafka destination is configured with.

Every kind takes a ``retry`` policy (:class:`RetryConfig`; for ``http`` it sits in the
target): with one, :func:`~proxy.destinations.registry.build_destination` wraps the
destination in the retry loop and a circuit breaker. Routes leave it unset for kafka and
archive (the client retries); consumers always set it, never giving up.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from proxy.destinations.http.targets import HttpTargetConfig
from proxy.destinations.retry_config import RetryConfig
from proxy.kafka.keys import key_function
from proxy.support.secrets import secret_value
from proxy.support.strict import StrictModel

__all__ = [
    "ArchiveDestinationConfig",
    "DestinationConfig",
    "HttpDestinationConfig",
    "KafkaConfig",
    "KafkaDestinationConfig",
    "ObjectArchiveDestinationConfig",
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


def _key_strategy(text: str) -> str:
    key_function(text)  # raises ValueError naming the problem
    return text


class KafkaDestinationConfig(StrictModel):
    # Destination kind: a Kafka topic.
    kind: Literal["kafka"]
    # Default: kafka.topic of config.yaml (a consumer must name one).
    topic: str | None = None
    # Another cluster's bootstrap servers; null: the cluster of kafka.bootstrap_servers
    # (for a consumer: the cluster it reads from).
    bootstrap_servers: str | None = None
    # run | job | dataset | none | a template of field paths such as "{job.namespace}".
    key: Annotated[str, AfterValidator(_key_strategy)] = "run"
    # Added to every message, after the ol_* headers.
    headers: dict[str, str] = Field(default_factory=dict)
    # librdkafka settings on top of kafka.producer; a separate producer when non-empty.
    producer: dict[str, str | int | float | bool] = Field(default_factory=dict)
    # Used when the topic is created; default: kafka.topic_partitions / _replication_factor.
    partitions: Annotated[int, Field(ge=1)] | None = None
    # Replication factor if the topic is created; default
    # kafka.topic_replication_factor.
    replication_factor: Annotated[int, Field(ge=1)] | None = None
    # Retry policy (with a circuit breaker) on top of the producer's own retries; null:
    # none, the spool covers outages.
    retry: RetryConfig | None = None

    @model_validator(mode="after")
    def _durability_is_not_negotiable(self) -> KafkaDestinationConfig:
        refuse_weaker_durability(self.producer)
        return self


class ArchiveDestinationConfig(StrictModel):
    """An ``archive`` destination in a rules file (or a consumer's ``archive`` target)."""

    # Destination kind: JSON Lines files partitioned by day and namespace.
    kind: Literal["archive"]
    # Relative: under routing.archive_root of config.yaml.
    directory: Path
    # Write gzip files (.jsonl.gz) instead of plain JSON Lines.
    gzip: bool = False
    # A file is finished (renamed to its final name) at this size...
    max_file_bytes: Annotated[int, Field(gt=0)] = 128 * MiB
    # ... or this long after it was opened, whichever comes first.
    max_file_age_seconds: Annotated[float, Field(gt=0)] = 300.0
    # Files open at once; beyond this the oldest open file is finished.
    max_open_files: Annotated[int, Field(gt=0)] = 64
    # A write not fsynced by then answers 503 (under openlineage-python's ~5 s timeout).
    write_timeout_seconds: Annotated[float, Field(gt=0)] = 4.0
    # Retry policy for failed writes (a full disk); null: the client gets 503 at once.
    retry: RetryConfig | None = None


class ObjectArchiveDestinationConfig(StrictModel):
    """An ``object_archive`` destination: the archive's layout in an S3-compatible bucket
    (AWS S3, Google Cloud Storage's S3 API, any S3-compatible server); see
    :mod:`proxy.destinations.object_archive.destination` and docs/consumers/object-storage.md.

    Credentials come from the usual AWS chain (environment, ~/.aws, instance or pod role)
    unless ``access_key_id_env``/``secret_access_key_env`` name the variables holding them.
    """

    # Destination kind: JSON Lines objects partitioned by day and namespace in a bucket.
    kind: Literal["object_archive"]
    # The bucket; it must exist.
    bucket: Annotated[str, Field(min_length=3, max_length=63)]
    # Key prefix of the archive inside the bucket (no leading or trailing "/").
    prefix: str = ""
    # Another endpoint than AWS S3: https://storage.googleapis.com for GCS, or a local
    # S3-compatible server. null: AWS (or AWS_ENDPOINT_URL when set).
    endpoint_url: str | None = None
    # Region for request signing; null: the AWS chain's (AWS_REGION, ~/.aws/config).
    region: str | None = None
    # Name of the environment variable holding the access key id (with
    # secret_access_key_env); null: the AWS chain finds credentials.
    access_key_id_env: str | None = None
    # Name of the environment variable holding the secret access key.
    secret_access_key_env: str | None = None
    # Path-style URLs (endpoint/bucket/key): most self-hosted servers need them.
    path_style: bool = False
    # Write gzip objects (.jsonl.gz, one gzip member per part) instead of plain JSON Lines.
    gzip: bool = False
    # An object is finished (its upload completed) at this size...
    max_file_bytes: Annotated[int, Field(gt=0)] = 128 * MiB
    # ... or this long after it was opened. A delivery is acknowledged only once its
    # object is complete, so this is also the longest wait of a delivery.
    max_file_age_seconds: Annotated[float, Field(gt=0)] = 10.0
    # Size of one multipart-upload part (S3's minimum is 5 MiB); bytes held per open
    # object stay about this plus what is being uploaded.
    part_bytes: Annotated[int, Field(ge=5 * MiB)] = 8 * MiB
    # Events a consumer hands over at once (its batch mode): one delivery waits for the
    # object to complete, so batches keep throughput up (see the docs).
    batch_events: Annotated[int, Field(ge=1)] = 500
    # Connect and read timeout of one request to the object store.
    request_timeout_seconds: Annotated[float, Field(gt=0)] = 10.0
    # At start, multipart uploads under the prefix older than this are aborted (left by
    # a writer that crashed mid-upload; they are never visible, but cost storage).
    abort_uploads_after_seconds: Annotated[float, Field(gt=0)] = 86_400.0
    # Retry policy for failed uploads; null: the failure is answered at once.
    retry: RetryConfig | None = None

    @property
    def batch_max_events(self) -> int:
        """How many events the consumer daemon hands over per delivery."""
        return self.batch_events

    @model_validator(mode="after")
    def _credentials_in_pairs(self) -> ObjectArchiveDestinationConfig:
        if (self.access_key_id_env is None) != (self.secret_access_key_env is None):
            raise ValueError("access_key_id_env and secret_access_key_env go together")
        if self.prefix.startswith("/") or self.prefix.endswith("/"):
            raise ValueError("prefix: no leading or trailing '/'")
        return self

    def key_prefix(self, partition: str) -> str:
        """Where the objects of ``partition`` (``dt=…/namespace=…``) go in the bucket."""
        prefix = f"{self.prefix}/" if self.prefix else ""
        return f"{prefix}{partition}/"


class HttpDestinationConfig(StrictModel):
    # Destination kind: an HTTP target (Marquez, Egeria, DataHub or any endpoint).
    kind: Literal["http"]
    # The target adapter and its settings (url, headers, auth, timeout_seconds, retry):
    # kind http (generic), marquez, egeria or datahub — see proxy/destinations/http/.
    target: HttpTargetConfig
    # false: best effort, sent off the request path; true: the client's 2xx waits for
    # the target (keep its timeout and retries short, clients give up after ~5 s).
    required: bool = False

    @property
    def retry(self) -> RetryConfig:
        """The target's retry policy (an HTTP target always has one)."""
        return self.target.retry


DestinationConfig = Annotated[
    KafkaDestinationConfig
    | ArchiveDestinationConfig
    | ObjectArchiveDestinationConfig
    | HttpDestinationConfig,
    Field(discriminator="kind"),
]
