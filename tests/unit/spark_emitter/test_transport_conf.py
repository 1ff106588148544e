"""``spark.openlineage.transport.*`` (the official Java integration's names) mapped onto
the openlineage-python client's transport configuration; each mapping is also built
into the client's real transport, so a name the client does not know fails here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from openlineage.client.transport import Transport, get_default_factory
from openlineage.client.transport.composite import CompositeTransport
from openlineage.client.transport.file import FileTransport
from openlineage.client.transport.http import HttpCompression, HttpTransport
from openlineage.client.transport.kafka import KafkaTransport

from spark_emitter.config import ConfigurationError, spark_transport

T = "spark.openlineage.transport."


def _built(transport: dict[str, Any] | None) -> Transport:
    assert transport is not None
    return get_default_factory().create(dict(transport))


def test_http_settings_map_onto_the_clients_http_transport() -> None:
    transport = spark_transport(
        {
            T + "type": "http",
            T + "url": "https://lineage.example:5000/prefix/",
            T + "endpoint": "api/v1/lineage",
            T + "auth.type": "api_key",
            T + "auth.apiKey": "s3cret",
            T + "timeoutInMillis": "1500",
            T + "compression": "gzip",
            T + "headers.X-Team": "sales",
            T + "retry.total": "2",
            T + "retry.backoff_factor": "0.01",
            "spark.openlineage.namespace": "not a transport key",
        }
    )
    assert transport == {
        "type": "http",
        "url": "https://lineage.example:5000/prefix/",
        "endpoint": "api/v1/lineage",
        "auth": {"type": "api_key", "apiKey": "s3cret"},
        "timeout": 1.5,
        "compression": "gzip",
        "custom_headers": {"X-Team": "sales"},
        "retry": {"total": 2, "backoff_factor": 0.01},
    }
    http = _built(transport)
    assert isinstance(http, HttpTransport)
    assert (http.timeout, http.compression) == (1.5, HttpCompression.GZIP)
    assert http.config.auth.get_bearer() == "Bearer s3cret"
    assert http.config.custom_headers == {"X-Team": "sales"}
    # The client keeps its defaults for the retry settings not given.
    assert http.config.retry["total"] == 2
    assert http.config.retry["status_forcelist"] == [500, 502, 503, 504]


def test_kafka_properties_keep_their_dots_and_topic_name_becomes_topic() -> None:
    transport = spark_transport(
        {
            T + "type": "kafka",
            T + "topicName": "openlineage.events",
            T + "messageKey": "fixed",
            T + "properties.bootstrap.servers": "127.0.0.1:9092",
            T + "properties.acks": "all",
        }
    )
    assert transport == {
        "type": "kafka",
        "topic": "openlineage.events",
        "messageKey": "fixed",
        "config": {"bootstrap.servers": "127.0.0.1:9092", "acks": "all"},
    }
    kafka = _built(transport)
    assert isinstance(kafka, KafkaTransport)
    assert (kafka.topic, kafka.message_key) == ("openlineage.events", "fixed")


def test_file_location_is_one_file_appended_to_as_the_official_writes_it(tmp_path: Path) -> None:
    location = str(tmp_path / "events.jsonl")
    transport = spark_transport({T + "type": "file", T + "location": location})
    assert transport == {"type": "file", "log_file_path": location, "append": True}
    built = _built(transport)
    assert isinstance(built, FileTransport)
    assert (built.config.log_file_path, built.config.append) == (location, True)


def test_console_needs_nothing() -> None:
    transport = spark_transport({T + "type": "CONSOLE"})
    assert transport == {"type": "console"}
    assert _built(transport).kind == "console"


def test_composite_children_are_named_transports_of_their_own(tmp_path: Path) -> None:
    location = str(tmp_path / "events.jsonl")
    transport = spark_transport(
        {
            T + "type": "composite",
            T + "continueOnFailure": "true",
            T + "transports.proxy.type": "http",
            T + "transports.proxy.url": "http://127.0.0.1:5000",
            T + "transports.local.type": "file",
            T + "transports.local.location": location,
        }
    )
    assert transport == {
        "type": "composite",
        "continue_on_failure": True,
        "transports": {
            "local": {"type": "file", "log_file_path": location, "append": True},
            "proxy": {"type": "http", "url": "http://127.0.0.1:5000"},
        },
    }
    composite = _built(transport)
    assert isinstance(composite, CompositeTransport)
    assert sorted(child.kind or "" for child in composite.transports) == ["file", "http"]


def test_no_transport_keys_leave_the_choice_to_the_client() -> None:
    assert spark_transport({"spark.openlineage.namespace": "etl"}) is None


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({T + "type": "carrier-pigeon"}, rf"{T}type: unknown transport 'carrier-pigeon'"),
        ({T + "endpoint": "api/v1/lineage"}, rf"{T}type: not set"),
        ({T + "type": "http", T + "urlParams.a": "1"}, rf"{T}urlParams.a: not a setting"),
        ({T + "type": "http"}, rf"{T}url: required by the http transport"),
        ({T + "type": "kafka", T + "topicName": "t"}, rf"{T}properties.bootstrap.servers"),
        ({T + "type": "file"}, rf"{T}location: required"),
        ({T + "type": "http", T + "url": "u", T + "timeoutInMillis": "x"}, "timeoutInMillis"),
        ({T + "type": "composite"}, rf"{T}transports.<name>.type"),
        (
            {T + "type": "composite", T + "transports.a.type": "smoke"},
            rf"{T}transports.a.type: unknown transport 'smoke'",
        ),
    ],
)
def test_bad_transport_settings_name_their_spark_conf_key(
    conf: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        spark_transport(conf)
