"""openlineage-python's own transports, not hand-built JSON: what lands in Kafka.

Each transport sends an event that carries every standard facet class of the client;
the record in Kafka must be exactly what the client serialized, keyed by the root
parent job, with the routing headers. An event whose eventTime the user built with
``datetime.now().isoformat()`` (no UTC offset) lands repaired and says so.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import attr
import orjson
import pytest
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import RunEvent
from openlineage.client.serde import Serde

from tests.support.client_events import PRODUCER, every_facet_event, standard_facet_classes
from tests.support.kafka_reader import Record, read_topic

pytestmark = pytest.mark.integration

TOKEN = "interop-token"
AUTH = {"enabled": True, "tokens": [{"name": "client", "token": TOKEN, "namespaces": ["*"]}]}
API_KEY = {"type": "api_key", "apiKey": TOKEN}
TRANSFORMER = (
    "openlineage.client.transport.transform.transformers."
    "job_namespace_replace_transformer.JobNamespaceReplaceTransformer"
)


def _http(url: str) -> dict[str, Any]:
    """The sync transport with every option that changes the request: prefix, gzip, key."""
    return {"type": "http", "url": f"{url}/openlineage", "compression": "gzip", "auth": API_KEY}


def _async_http(url: str) -> dict[str, Any]:
    return {"type": "async_http", "url": url, "compression": "gzip", "auth": API_KEY}


def _composite(url: str) -> dict[str, Any]:
    return {
        "type": "composite",
        "continue_on_success": True,
        "transports": {
            "sync": _http(url),
            "async": _async_http(url),
            "renamed": {
                "type": "transform",
                "transformer_class": TRANSFORMER,
                "transformer_properties": {"new_job_namespace": "renamed"},
                "transport": _http(url),
            },
        },
    }


async def _emit(transport: dict[str, Any], *events: RunEvent) -> None:
    """Emit with a client configured like a user would, off the proxy's event loop."""

    def run() -> None:
        client = OpenLineageClient(config={"transport": transport})
        for event in events:
            client.emit(event)
        client.close(timeout=30)

    await asyncio.to_thread(run)


def _sent(event: RunEvent) -> dict[str, Any]:
    return orjson.loads(Serde.to_json(event))


def _facet_classes_in(node: Any) -> set[type]:
    """Classes of every attrs object in an event built by the client."""
    found: set[type] = set()
    if attr.has(type(node)):
        found.add(type(node))
        for field in attr.fields(type(node)):
            found |= _facet_classes_in(getattr(node, field.name))
    elif isinstance(node, dict):
        for value in node.values():
            found |= _facet_classes_in(value)
    elif isinstance(node, list):
        for value in node:
            found |= _facet_classes_in(value)
    return found


def _assert_routing_headers(record: Record, namespace: str) -> None:
    assert record.headers["ol_kind"] == b"run"
    assert record.headers["ol_event_type"] == b"COMPLETE"
    assert record.headers["ol_namespace"] == namespace.encode()
    assert record.headers["ol_name"] == b"dag_x.task_y"
    assert record.headers["ol_producer"] == PRODUCER.encode()


def test_the_interop_event_carries_every_standard_facet_class_of_the_client():
    missing = standard_facet_classes() - _facet_classes_in(every_facet_event())
    assert not missing, sorted(c.__name__ for c in missing)


@pytest.mark.parametrize("transport", [_http, _async_http], ids=["http", "async_http"])
async def test_every_standard_facet_lands_in_kafka_exactly_as_the_client_sent_it(
    start_proxy, broker, topic, transport
):
    event = every_facet_event()
    async with start_proxy(auth=AUTH) as url:
        await _emit(transport(url), event)
    [record] = read_topic(broker.bootstrap_servers, topic, expect=1)
    assert orjson.loads(record.value) == _sent(event)
    assert record.key == f"run:{event.run.runId}"  # the run's own id, facets or not
    _assert_routing_headers(record, "airflow")
    assert "ol_repairs" not in record.headers


async def test_composite_transport_delivers_through_each_child_including_a_transform(
    start_proxy, broker, topic
):
    event = every_facet_event()
    async with start_proxy(auth=AUTH) as url:
        await _emit(_composite(url), event)
    records = read_topic(broker.bootstrap_servers, topic, expect=3)
    by_namespace: dict[str, list[Record]] = {}
    for record in records:
        by_namespace.setdefault(orjson.loads(record.value)["job"]["namespace"], []).append(record)
    assert sorted((ns, len(rs)) for ns, rs in by_namespace.items()) == [
        ("airflow", 2),
        ("renamed", 1),
    ]
    for record in by_namespace["airflow"]:
        assert orjson.loads(record.value) == _sent(event)
        assert record.key == f"run:{event.run.runId}"
    [renamed] = by_namespace["renamed"]
    assert renamed.key == f"run:{event.run.runId}"  # a renamed job is still the same run
    _assert_routing_headers(renamed, "renamed")


@pytest.mark.parametrize("transport", [_http, _async_http], ids=["http", "async_http"])
async def test_event_time_from_datetime_now_lands_with_utc_offset_and_an_ol_repairs_header(
    start_proxy, broker, topic, transport
):
    naive = datetime.now().isoformat()  # what users write; the client sends it as it is
    event = every_facet_event(event_time=naive)
    async with start_proxy(auth=AUTH) as url:
        await _emit(transport(url), event)
    [record] = read_topic(broker.bootstrap_servers, topic, expect=1)
    landed = orjson.loads(record.value)
    assert landed["eventTime"] == naive + "Z"
    assert {**landed, "eventTime": naive} == _sent(event)  # nothing else changed
    assert record.key == f"run:{event.run.runId}"
    assert orjson.loads(record.headers["ol_repairs"]) == [
        {"repair": "naive_date_time", "pointer": "/eventTime", "from": naive, "to": naive + "Z"}
    ]
