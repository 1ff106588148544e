"""A ``kafka`` destination's configuration: a topic, its message keys and headers, and
producer settings on top of config.yaml's ``kafka:`` (:mod:`proxy.kafka.settings`)."""

from __future__ import annotations

import functools
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from proxy.destinations.config import DestinationConfigBase, DryRunDefaults
from proxy.destinations.retry_config import RetryConfig
from proxy.kafka.keys import KeyFunction, key_function
from proxy.kafka.settings import refuse_weaker_durability

__all__ = ["KafkaDestinationConfig"]


def _key_strategy(text: str) -> str:
    key_function(text)  # raises ValueError naming the problem
    return text


class KafkaDestinationConfig(DestinationConfigBase):
    runtime: ClassVar[str] = "proxy.destinations.kafka.destination"

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

    def retry_policy(self) -> RetryConfig | None:
        return self.retry

    def dry_run(self, event: dict[str, Any], defaults: DryRunDefaults) -> dict[str, Any]:
        return {"topic": self.topic or defaults.topic, "key": self._key_for(event)}

    @functools.cached_property
    def _key_for(self) -> KeyFunction:
        # Parsed once per destination, not once per dry-run event.
        return key_function(self.key)
