"""Every Kafka client of a cluster takes its security settings (``kafka.producer``'s
``security.protocol``, ``sasl.*``, ``ssl.*``), secrets possibly from the environment; and
settings that cannot work are refused at load with the file and line. (That they work
against a real SASL_SSL broker: tests/integration/test_kafka_sasl.py.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from consumers.config import ConsumerConfig
from consumers.daemon import ConsumerDaemon
from consumers.dlq_tools import reader_settings
from consumers.kafka_source import consumer_settings
from proxy.config.settings import load_config
from proxy.kafka.settings import KafkaConfig, producer_settings
from tests.support.config_errors import config_refusal
from tests.support.paths import REPO

SECURITY: dict[str, str | int | float | bool] = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanisms": "PLAIN",
    "sasl.username": "lineage",
    "sasl.password_env": "TEST_KAFKA_PASSWORD",
    # Any file that exists: its presence is checked at load, its content by librdkafka.
    "ssl.ca.location": str(Path(__file__)),
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
        "proxy/kafka/producer.py",
        "consumers/kafka_source.py",
        "consumers/dlq_tools.py",
    }


_SASL = """\
kafka:
  bootstrap_servers: kafka-1:9096
  producer:
    security.protocol: SASL_SSL
    sasl.mechanisms: SCRAM-SHA-512
    sasl.username: lineage
    sasl.password_env: TEST_KAFKA_PASSWORD
    ssl.ca.location: {ca}
"""


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (("SASL_SSL", "SASL_TLS"), "security.protocol: 'SASL_TLS' is none of PLAINTEXT, SSL"),
        (("SCRAM-SHA-512", "SCRAM-SHA-513"), "sasl.mechanisms: 'SCRAM-SHA-513' is none of"),
        (("    sasl.password_env: TEST_KAFKA_PASSWORD\n", ""), "SCRAM-SHA-512 needs sasl.password"),
        (("    sasl.username: lineage\n", ""), "SCRAM-SHA-512 needs sasl.username"),
        (("{ca}", "/nowhere/ca.pem"), "ssl.ca.location: /nowhere/ca.pem does not exist"),
    ],
)
def test_security_settings_that_cannot_work_are_one_line_with_the_producer_line(
    tmp_path: Path, change: tuple[str, str], said: str
) -> None:
    text = _SASL.replace(*change).format(ca=Path(__file__))
    config, message = config_refusal(tmp_path, text)
    assert message.startswith(f"{config}:3: kafka.producer: "), message
    assert said in message and "\n" not in message


def test_working_security_settings_load(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(_SASL.format(ca=Path(__file__)))
    settings = load_config(config, environ={}).kafka.producer
    assert settings["sasl.password_env"] == "TEST_KAFKA_PASSWORD"


def test_serve_with_a_missing_ca_file_exits_2_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(_SASL.format(ca="/nowhere/ca.pem"))
    done = subprocess.run(
        [sys.executable, "-m", "proxy", "serve", "--config", str(config)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    [line] = [x for x in done.stderr.splitlines() if x != "configuration error:"]
    assert line.startswith(f"{config}:3: kafka.producer: ") and "ssl.ca.location" in line
