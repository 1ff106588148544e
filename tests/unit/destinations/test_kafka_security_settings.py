"""Every Kafka client of a cluster takes its security settings (``kafka.producer``'s
``security.protocol``, ``sasl.*``, ``ssl.*``), secrets possibly from the environment."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from consumers.config import ConsumerConfig
from consumers.daemon import ConsumerDaemon
from consumers.dlq_tools import reader_settings
from consumers.kafka_source import consumer_settings
from proxy.destinations.config import KafkaConfig, producer_settings
from tests.support.paths import REPO

SECURITY: dict[str, str | int | float | bool] = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanisms": "PLAIN",
    "sasl.username": "lineage",
    "sasl.password_env": "TEST_KAFKA_PASSWORD",
    "ssl.ca.location": "/etc/ssl/ca.pem",
}
RESOLVED = {**SECURITY, "sasl.password": "s3cret"}
del RESOLVED["sasl.password_env"]


def _has_security(settings: dict[str, object]) -> bool:
    return all(settings.get(key) == value for key, value in RESOLVED.items()) and not any(
        key.endswith("_env") for key in settings
    )


@pytest.fixture(autouse=True)
def _password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_KAFKA_PASSWORD", "s3cret")


def test_consumer_daemon_consumer_dead_letters_and_republisher_all_take_security() -> None:
    config = ConsumerConfig.model_validate(
        {"target": {"kind": "kafka", "topic": "copy"}, "dead_letter": {"topic": "dlq"}}
    )
    settings = {**SECURITY, "linger.ms": 20}
    daemon = ConsumerDaemon(
        "c", config, bootstrap_servers="b:9092", default_topic="t", cluster_settings=settings
    )
    assert _has_security(daemon.source.settings)
    assert "linger.ms" not in daemon.source.settings  # producer tuning stays with producers
    assert _has_security(daemon._dlq_producer.settings)
    # The republishing target's producer (and replay's) is built by the registry from
    # the resources' kafka.producer with producer_settings.
    republisher = producer_settings("b:9092", daemon._resources.kafka.producer)
    assert _has_security(republisher)
    assert republisher["acks"] == "all"


def test_dlq_tools_read_with_the_security_settings_and_never_commit() -> None:
    settings = reader_settings(
        KafkaConfig(bootstrap_servers="b:9092", producer={**SECURITY, "linger.ms": 20})
    )
    assert _has_security(settings) and "linger.ms" not in settings
    assert settings["enable.auto.commit"] is False


def test_consumer_group_settings_may_add_a_secret_from_the_environment() -> None:
    settings = consumer_settings(
        "b:9092",
        "g",
        session_timeout_ms=1,
        heartbeat_interval_ms=1,
        max_poll_interval_ms=1,
        auto_offset_reset="earliest",
        overrides={"ssl.key.password_env": "TEST_KAFKA_PASSWORD"},
    )
    assert settings["ssl.key.password"] == "s3cret"
    assert settings["enable.auto.commit"] is False


def test_missing_environment_variable_fails_the_config_naming_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TEST_KAFKA_PASSWORD")
    with pytest.raises(ValidationError) as caught:
        KafkaConfig(bootstrap_servers="b:9092", producer=SECURITY)
    assert "producer.sasl.password_env" in str(caught.value)
    assert "TEST_KAFKA_PASSWORD" in str(caught.value)


def test_no_module_builds_a_librdkafka_client_except_those_that_take_built_settings() -> None:
    # KafkaProducer (its producers and admin clients use producer_settings' output),
    # KafkaSource (consumer_settings' output) and the DLQ reader (reader_settings', tested
    # above); anything else would bypass the security keys.
    built = re.compile(r"\b(Producer|Consumer|AdminClient)\(")
    builders = {
        path.relative_to(REPO).as_posix()
        for package in ("proxy", "consumers")
        for path in (REPO / package).rglob("*.py")
        if built.search(path.read_text())
    }
    assert builders == {
        "proxy/destinations/kafka_producer.py",
        "consumers/kafka_source.py",
        "consumers/dlq_tools.py",
    }
