"""An event larger than Kafka takes is refused before any destination is written:
one clear answer (413 with a pointer), no copy in Kafka nor in the archive."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from aiohttp import ClientSession

from proxy.server.embedded_broker import free_port
from tests.support.figures import report
from tests.support.load import kafka_run_ids
from tests.support.paths import fresh_spool_directory
from tests.support.sample_events import PRODUCER, run_event

pytestmark = pytest.mark.integration


def _event_of_about(size: int) -> dict:
    event = run_event()
    event["job"]["facets"]["blob"] = {
        "_producer": PRODUCER,
        "_schemaURL": "https://example.com/schemas/Blob.json#/$defs/Blob",
        "data": "x" * size,
    }
    return event


def _all_bytes_under(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


async def test_event_over_the_kafka_message_limit_gets_413_and_is_stored_nowhere(
    start_proxy, broker, topic, tmp_path: Path
):
    big = _event_of_about(1_500_000)  # under max_body_bytes (5 MiB), over Kafka's ~1 MB
    small = run_event()
    async with (
        start_proxy(routing={"archive_root": tmp_path}) as url,
        ClientSession() as session,
    ):
        single = await session.post(f"{url}/api/v1/lineage", data=orjson.dumps(big))
        single_body = await single.json()
        batch = await session.post(f"{url}/api/v1/lineage/batch", data=orjson.dumps([small, big]))
        batch_body = await batch.json()
    found = await asyncio.to_thread(kafka_run_ids, broker.bootstrap_servers, topic)
    archived_text = await asyncio.to_thread(_all_bytes_under, tmp_path)
    report(
        "oversized_event_refused_before_any_write",
        sent=3,
        statuses=[single.status, batch.status],
        found_in_kafka=sorted(found),
        archive_bytes=len(archived_text),
    )
    assert single.status == 413
    assert single_body["details"][0]["pointer"] == ""
    assert "takes" in single_body["details"][0]["message"]
    assert batch.status == 200 and batch_body["status"] == "partial_success"
    assert [f["status"] for f in batch_body["failed_events"]] == [413]
    assert batch_body["failed_events"][0]["index"] == 1
    assert found == {small["run"]["runId"]: 1}
    assert big["run"]["runId"].encode() not in archived_text
    assert small["run"]["runId"].encode() in archived_text


async def test_key_and_headers_count_toward_the_limit_before_any_write_single_and_batch(
    start_proxy, broker, topic, tmp_path: Path
):
    """A 600,000-character job name is repeated by the ol_name header; a 520,000-character
    producer by ol_producer. The event alone is under Kafka's limit, the message is not:
    413 pointing at the field, nothing stored — not in the archive either (issue 25, items
    2 and 3)."""
    long_name = run_event(name="n" * 600_000)
    long_producer = run_event()
    long_producer["producer"] = "https://example.com/" + "p" * 520_000
    small = run_event()
    async with (
        start_proxy(routing={"archive_root": tmp_path}) as url,
        ClientSession() as session,
    ):
        single = await session.post(f"{url}/api/v1/lineage", data=orjson.dumps(long_name))
        single_body = await single.json()
        batch = await session.post(
            f"{url}/api/v1/lineage/batch", data=orjson.dumps([small, long_name, long_producer])
        )
        batch_body = await batch.json()
    found = await asyncio.to_thread(kafka_run_ids, broker.bootstrap_servers, topic)
    archived = await asyncio.to_thread(_all_bytes_under, tmp_path)
    report(
        "key_and_headers_counted_before_any_write",
        sent=4,
        statuses=[single.status, batch.status],
        found_in_kafka=len(found),
        archive_bytes=len(archived),
    )
    assert single.status == 413, single_body
    assert single_body["details"][0]["pointer"] == "/job/name"
    assert "key and headers" in single_body["details"][0]["message"]
    failed = {f["index"]: f for f in batch_body["failed_events"]}
    assert sorted(failed) == [1, 2] and {f["status"] for f in failed.values()} == {413}
    assert found == {small["run"]["runId"]: 1}
    for refused in (long_name, long_producer):
        assert refused["run"]["runId"].encode() not in archived
    assert small["run"]["runId"].encode() in archived


async def test_with_kafka_down_an_event_too_large_with_its_key_is_not_spooled(
    start_proxy_on, tmp_path: Path
):
    """Before: spooled with a 2xx, then refused by Kafka forever (the drain stuck)."""
    spool = {"spool": {"directory": fresh_spool_directory()}}
    long_name = run_event(name="n" * 600_000)
    async with (
        start_proxy_on(bootstrap=f"127.0.0.1:{free_port()}", kafka=spool) as url,
        ClientSession() as session,
    ):
        response = await session.post(f"{url}/api/v1/lineage", data=orjson.dumps(long_name))
        body = await response.json()
        async with session.get(f"{url}/readyz") as ready:
            spooled = (await ready.json())["details"]["kafka"]["events"]
    assert response.status == 413, body
    assert body["details"][0]["pointer"] == "/job/name"
    assert spooled == 0
