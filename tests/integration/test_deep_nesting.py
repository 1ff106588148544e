"""Events nested deeper than the proxy can store: a 400 naming the place, never a 500.

The parser takes 1,024 levels of arrays and objects, the writer 254; an event is
refused past ``ingest.MAX_EVENT_DEPTH`` (252) with a pointer to the first value too deep,
its good batch-mates are stored, and nothing is logged as an error of ours.
"""

from __future__ import annotations

import logging

import orjson
import pytest

from proxy.web.ingest import MAX_EVENT_DEPTH
from tests.integration.test_lineage_endpoint import post
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.sample_events import PRODUCER, run_event

pytestmark = pytest.mark.integration

# An event's custom facet value sits at level 5: event, run, facets, the facet, value.
_VALUE_LEVEL = 5


def nested_event(depth: int, name: str = "deep") -> bytes:
    """A valid RunEvent whose deepest array is at level ``depth`` (the event is level 1),
    as JSON text: past 254 levels no Python JSON writer can make it."""
    event = run_event(name=name)
    event["run"]["facets"]["deep"] = {
        "_producer": PRODUCER,
        "_schemaURL": "https://example.com/DeepRunFacet.json#/$defs/DeepRunFacet",
        "value": "@",
    }
    arrays = depth - _VALUE_LEVEL + 1
    return orjson.dumps(event).replace(b'"@"', b"[" * arrays + b'"bottom"' + b"]" * arrays)


def first_too_deep(prefix: str = "") -> str:
    """The pointer of the first array past MAX_EVENT_DEPTH in a :func:`nested_event`."""
    return f"{prefix}/run/facets/deep/value" + "/0" * (MAX_EVENT_DEPTH + 1 - _VALUE_LEVEL)


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


@pytest.mark.parametrize("depth", [MAX_EVENT_DEPTH + 1, 256, 600, 1024])
async def test_an_event_nested_too_deep_gets_400_with_the_pointer_and_nothing_lands(
    start_proxy, broker, topic, caplog, depth
):
    caplog.set_level(logging.INFO)
    event = nested_event(depth)
    async with start_proxy() as url:
        status, body, _ = await post(f"{url}/api/v1/lineage", event)
        # A good event after it is stored: the marker that the bad one was not.
        marker = run_event(name="marker")
        assert (await post(f"{url}/api/v1/lineage", marker))[0] == 200
    assert status == 400, body
    assert body["reason"] == "too_deep"
    assert [d["pointer"] for d in body["details"]] == [first_too_deep()]
    assert f"{MAX_EVENT_DEPTH} levels" in body["details"][0]["message"]
    records = read_all_produced_so_far(broker.bootstrap_servers, topic)
    assert [orjson.loads(r.value)["job"]["name"] for r in records] == ["marker"]
    assert errors_logged(caplog) == []


async def test_an_event_at_the_depth_limit_is_stored_exactly(start_proxy, broker, topic):
    event = nested_event(MAX_EVENT_DEPTH)
    async with start_proxy() as url:
        status, body, _ = await post(f"{url}/api/v1/lineage", event)
    assert (status, body) == (200, {"status": "success"})
    [record] = read_all_produced_so_far(broker.bootstrap_servers, topic)
    assert orjson.loads(record.value) == orjson.loads(event)


async def test_a_batch_stores_its_good_events_and_names_the_deep_ones(
    start_proxy, broker, topic, caplog
):
    caplog.set_level(logging.INFO)
    # The batch's array is one more level: 1,023 is the deepest event the parser takes.
    events = [orjson.dumps(run_event(name="a")), nested_event(300)]
    events += [orjson.dumps(run_event(name="b")), nested_event(1023)]
    async with start_proxy() as url:
        status, body, _ = await post(f"{url}/api/v1/lineage/batch", b"[" + b",".join(events) + b"]")
    assert status == 200, body
    assert body["status"] == "partial_success"
    assert body["summary"]["successful"] == 2
    assert [(f["index"], f["status"], f["retriable"]) for f in body["failed_events"]] == [
        (1, 400, False),
        (3, 400, False),
    ]
    assert [f["details"][0]["pointer"] for f in body["failed_events"]] == [
        first_too_deep("/1"),
        first_too_deep("/3"),
    ]
    records = read_all_produced_so_far(broker.bootstrap_servers, topic)
    assert sorted(orjson.loads(r.value)["job"]["name"] for r in records) == ["a", "b"]
    assert errors_logged(caplog) == []
