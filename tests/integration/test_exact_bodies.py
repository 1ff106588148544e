"""What the client sent is what Kafka holds: integers of any size, every gzip member."""

from __future__ import annotations

import gzip
import json
import zlib

import orjson
import pytest
from aiohttp import ClientSession

from proxy.web.ingest import MAX_EVENT_DEPTH
from tests.support.kafka_reader import read_topic
from tests.support.sample_events import facet, rich_run_event, run_event

pytestmark = pytest.mark.integration

BIG = {
    "u64_max_plus_one": 2**64,
    "far_beyond": 2**200,
    "below_i64_min": -(2**63) - 1,
    "u64_max": 2**64 - 1,
    "three_hundred_digits": int("9" * 300),
}


def event_with_big_integers() -> dict:
    event = run_event()
    event["run"]["facets"]["counters"] = facet("CountersRunFacet", **BIG)
    return event


async def post(url: str, body: bytes, **headers: str) -> tuple[int, dict]:
    async with ClientSession() as session, session.post(url, data=body, headers=headers) as resp:
        return resp.status, await resp.json()


async def test_integers_beyond_64_bits_land_in_kafka_exactly(start_proxy, broker, topic):
    single, batched = event_with_big_integers(), [event_with_big_integers() for _ in range(2)]
    async with start_proxy() as url:
        status, body = await post(f"{url}/api/v1/lineage", json.dumps(single).encode())
        assert (status, body["status"]) == (200, "success")
        status, body = await post(f"{url}/api/v1/lineage/batch", json.dumps(batched).encode())
        assert (status, body["summary"]["successful"]) == (200, 2)
    records = read_topic(broker.bootstrap_servers, topic, expect=3)
    stored = sorted((json.loads(r.value) for r in records), key=lambda e: e["run"]["runId"])
    sent = sorted([single, *batched], key=lambda e: e["run"]["runId"])
    assert stored == sent  # the standard library compares integers exactly
    for record in records:
        assert b'"u64_max_plus_one":18446744073709551616' in record.value
        assert b"e+" not in record.value  # no integer became a float


async def test_every_member_of_a_gzip_body_is_read(start_proxy, broker, topic):
    events = [run_event() for _ in range(3)]
    whole = orjson.dumps(events)
    cut = len(whole) // 2
    # What a streaming compressor that starts a new member per flush produces.
    body = gzip.compress(whole[:cut]) + gzip.compress(whole[cut:])
    async with start_proxy() as url:
        status, answer = await post(
            f"{url}/api/v1/lineage/batch", body, **{"Content-Encoding": "gzip"}
        )
    assert (status, answer["summary"]["successful"]) == (200, 3), answer
    records = read_topic(broker.bootstrap_servers, topic, expect=3)
    assert sorted(orjson.loads(r.value)["run"]["runId"] for r in records) == sorted(
        e["run"]["runId"] for e in events
    )


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("gzip", gzip.compress(orjson.dumps(run_event())) + b"trailing garbage"),
        ("gzip", gzip.compress(orjson.dumps(run_event()))[:-6]),  # truncated: no CRC check
        ("deflate", zlib.compress(orjson.dumps(run_event())) + b"more"),
    ],
    ids=["gzip-trailing-garbage", "gzip-truncated", "deflate-trailing-data"],
)
async def test_compressed_body_with_data_we_cannot_account_for_is_400(
    start_proxy, broker, topic, encoding, body
):
    async with start_proxy() as url:
        status, answer = await post(f"{url}/api/v1/lineage", body, **{"Content-Encoding": encoding})
    assert (status, answer["reason"]) == (400, "bad_encoding"), answer


async def test_a_batch_checked_for_depth_lands_byte_for_byte_with_transforms_and_repairs_applied(
    start_proxy, broker, topic, tmp_path
):
    # A body with more brackets than an event may nest levels is checked for depth by
    # writing each event; that JSON becomes the payload of an event nothing changes, but
    # never of one a rule transformed or a repair changed, nor of one orjson cannot write.
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "version: 1\n"
        "destinations:\n  kafka: {kind: kafka, key: run}\n"
        "rules:\n"
        "  - name: redact-sql\n"
        "    match: {job_namespace: team-t}\n"
        "    transform: [{redact: [job.facets.sql.query]}]\n"
        "    to: [kafka]\n"
        "default: {to: [kafka]}\n"
    )
    plain = [rich_run_event(name=f"plain-{i}") for i in range(20)]
    transformed = rich_run_event(namespace="team-t", name="transformed")
    transformed["job"]["facets"]["sql"] = facet("SQLJobFacet", query="SELECT secret FROM t")
    repaired = rich_run_event(name="repaired")
    repaired["inputs"][0]["facets"]["dataSource"]["uri"] = "/data/orders.csv"
    big = event_with_big_integers()
    batch = [*plain, transformed, repaired, big]
    body = orjson.dumps(batch[:-1])[:-1] + b"," + json.dumps(big).encode() + b"]"
    assert body.count(b"{") + body.count(b"[") > MAX_EVENT_DEPTH  # the depth check runs
    async with start_proxy(routing={"rules": rules}) as url:
        status, answer = await post(f"{url}/api/v1/lineage/batch", body)
    assert (status, answer["summary"]["successful"]) == (200, len(batch)), answer
    records = read_topic(broker.bootstrap_servers, topic, expect=len(batch))
    by_job = {orjson.loads(r.value)["job"]["name"]: r.value for r in records}
    for event in plain:
        assert by_job[event["job"]["name"]] == orjson.dumps(event)
    assert b"SELECT secret" not in by_job["transformed"]
    assert orjson.loads(by_job["repaired"])["inputs"][0]["facets"]["dataSource"]["uri"] == (
        "file:///data/orders.csv"
    )
    assert json.loads(by_job[big["job"]["name"]]) == big
