"""The HTTP API against a real broker: what the client hears and what lands in Kafka."""

from __future__ import annotations

import gzip
import uuid

import orjson
import pytest
from aiohttp import ClientSession

from tests.integration.test_misbehaving_clients import metric
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.load import archive_run_ids, landed_before_a_marker
from tests.support.sample_events import dataset_event, job_event, rich_run_event, run_event

pytestmark = pytest.mark.integration


async def post(url: str, body: object, **headers: str) -> tuple[int, dict, dict]:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    async with ClientSession() as session, session.post(url, data=data, headers=headers) as resp:
        text = await resp.read()
        return resp.status, (orjson.loads(text) if text else {}), dict(resp.headers)


async def test_single_event_lands_in_kafka_with_run_key_and_headers(start_proxy, broker, topic):
    event = rich_run_event(namespace="team-a", name="etl.daily")
    async with start_proxy() as url:
        status, body, _ = await post(f"{url}/api/v1/lineage", event)
    assert (status, body) == (200, {"status": "success"})
    [record] = read_all_produced_so_far(broker.bootstrap_servers, topic)
    assert record.key == f"run:{event['run']['runId']}"
    assert orjson.loads(record.value) == event
    assert record.headers["ol_event_type"] == b"START"
    assert record.headers["ol_namespace"] == b"team-a"
    assert record.headers["ol_kind"] == b"run"


async def test_every_event_of_a_run_shares_its_key_whatever_facets_it_carries(
    start_proxy, broker, topic
):
    """openlineage-python's COMPLETE without facets, or a client that sends the parent facet
    only on START: keyed by the parent's job, such a run was split over two keys (two
    partitions, delivered out of order — issue 36). Keyed by runId, every event of each run
    lands under one key, in the order it was acknowledged. Seen failing on the root-job key."""
    app_run = str(uuid.uuid4())
    root = ("spark", "my_app", app_run)
    steps = [str(uuid.uuid4()) for _ in range(5)]
    events = [run_event(namespace="spark", name="my_app", run_id=app_run)]
    for i, step in enumerate(steps):
        name = f"my_app.step_{i}"
        started = run_event(namespace="spark", name=name, run_id=step, parent=root, root=root)
        bare = run_event(namespace="spark", name=name, run_id=step, event_type="COMPLETE")
        events += [started, bare]
    async with start_proxy() as url:
        for event in events:
            assert (await post(f"{url}/api/v1/lineage", event))[0] == 200
    records = read_all_produced_so_far(broker.bootstrap_servers, topic)
    by_key: dict[str | None, list[dict]] = {}
    for record in records:
        by_key.setdefault(record.key, []).append(orjson.loads(record.value))
    assert set(by_key) == {f"run:{run_id}" for run_id in [app_run, *steps]}
    for key, landed in by_key.items():
        assert landed == [e for e in events if f"run:{e['run']['runId']}" == key]


async def test_job_and_dataset_events_are_keyed_by_what_they_describe(start_proxy, broker, topic):
    async with start_proxy() as url:
        assert (await post(f"{url}/api/v1/lineage", job_event("ns", "j")))[0] == 200
        assert (await post(f"{url}/api/v1/lineage", dataset_event("s3://b", "k")))[0] == 200
    keys = sorted(r.key or "" for r in read_all_produced_so_far(broker.bootstrap_servers, topic))
    assert keys == ["dataset:s3://b/k", "job:ns/j"]


@pytest.mark.parametrize("prefix", ["/openlineage", "/a/b/c", "/"])
async def test_any_path_prefix_reaches_the_endpoint(start_proxy, broker, topic, prefix):
    async with start_proxy() as url:
        base = url + prefix.rstrip("/")
        assert (await post(f"{base}/api/v1/lineage", run_event()))[0] == 200
        status, body, _ = await post(f"{base}/api/v1/lineage/batch", [run_event()])
        assert (status, body["status"]) == (200, "success")
        # The plain URL has routes of its own (cheaper to find): same endpoint label.
        assert (await post(f"{url}/api/v1/lineage", run_event()))[0] == 200
        counted = {
            endpoint: await metric(
                url, "lineage_proxy_http_requests_total", endpoint=endpoint, status="200"
            )
            for endpoint in ("lineage", "lineage_batch")
        }
    assert counted == {"lineage": 2.0, "lineage_batch": 1.0}
    assert len(read_all_produced_so_far(broker.bootstrap_servers, topic)) == 3


async def test_invalid_event_gets_400_naming_the_field_and_nothing_lands(
    start_proxy, broker, topic
):
    event = run_event()
    event["run"]["runId"] = "not-a-uuid"
    del event["eventTime"]
    async with start_proxy() as url:
        status, body, _ = await post(f"{url}/api/v1/lineage", event)
        landed = await landed_before_a_marker(
            url, broker.bootstrap_servers, topic, namespace="team-a", name="etl.daily"
        )
    assert status == 400
    pointers = {d["pointer"] for d in body["details"]}
    assert {"/run/runId", "/eventTime"} <= pointers
    assert all(d["message"] for d in body["details"])
    assert landed == []


async def test_malformed_json_is_400_and_mentions_an_odd_content_type(start_proxy):
    async with start_proxy() as url:
        status, body, _ = await post(
            f"{url}/api/v1/lineage", b"{not json", **{"Content-Type": "application/xml"}
        )
    assert status == 400
    assert "not valid JSON" in body["error"] and "application/xml" in body["error"]


async def test_missing_content_type_is_accepted_leniently(start_proxy, broker, topic):
    async with start_proxy() as url, ClientSession() as session:
        resp = await session.post(
            f"{url}/api/v1/lineage",
            data=orjson.dumps(run_event()),
            skip_auto_headers=["Content-Type"],
        )
        assert resp.status == 200
    assert len(read_all_produced_so_far(broker.bootstrap_servers, topic)) == 1


async def test_batch_with_bad_events_stores_the_good_ones_and_names_the_bad(
    start_proxy, broker, topic
):
    good = [run_event(name=f"good.{i}") for i in range(3)]
    bad_uuid = run_event(name="bad.uuid")
    bad_uuid["run"]["runId"] = "nope"
    bad_type = run_event(name="bad.type", event_type="FINISHED")
    batch = [good[0], bad_uuid, good[1], bad_type, good[2]]
    async with start_proxy() as url:
        status, body, _ = await post(f"{url}/api/v1/lineage/batch", batch)
    assert status == 200
    assert body["status"] == "partial_success"
    assert body["summary"] == {
        "received": 5,
        "successful": 3,
        "failed": 2,
        "retriable": 0,
        "non_retriable": 2,
    }
    failed = {f["index"]: f for f in body["failed_events"]}
    assert set(failed) == {1, 3}
    assert failed[1]["details"][0]["pointer"] == "/1/run/runId"
    assert failed[3]["details"][0]["pointer"] == "/3/eventType"
    assert not failed[1]["retriable"]
    names = sorted(
        orjson.loads(r.value)["job"]["name"]
        for r in read_all_produced_so_far(broker.bootstrap_servers, topic)
    )
    assert names == ["good.0", "good.1", "good.2"]


async def test_batch_of_only_bad_events_is_400_and_non_array_is_400(start_proxy):
    async with start_proxy() as url:
        status, body, _ = await post(f"{url}/api/v1/lineage/batch", [{"eventTime": "x"}, 3])
        assert status == 400
        assert body["summary"]["failed"] == 2
        status, body, _ = await post(f"{url}/api/v1/lineage/batch", run_event())
        assert status == 400 and "JSON array" in body["error"]


async def test_empty_batch_succeeds_with_zero_counts(start_proxy):
    async with start_proxy() as url:
        status, body, _ = await post(f"{url}/api/v1/lineage/batch", [])
    assert status == 200 and body["summary"]["received"] == 0


async def test_batch_over_the_event_limit_is_413_and_nothing_lands(
    start_proxy, broker, topic, tmp_path
):
    batch = [run_event() for _ in range(3)]
    routing = {"archive_root": tmp_path}
    async with start_proxy(server={"max_batch_events": 2}, routing=routing) as url:
        status, _, _ = await post(f"{url}/api/v1/lineage/batch", batch)
        landed = await landed_before_a_marker(
            url, broker.bootstrap_servers, topic, namespace="team-a", name="etl.daily"
        )
    assert status == 413
    assert landed == []
    [marker] = archive_run_ids(tmp_path)
    assert marker not in {e["run"]["runId"] for e in batch}


async def test_gzip_body_is_inflated_and_stored(start_proxy, broker, topic):
    event = rich_run_event()
    async with start_proxy() as url:
        status, _, _ = await post(
            f"{url}/api/v1/lineage",
            gzip.compress(orjson.dumps(event)),
            **{"Content-Encoding": "gzip", "Content-Type": "application/json"},
        )
    assert status == 200
    [record] = read_all_produced_so_far(broker.bootstrap_servers, topic)
    assert orjson.loads(record.value) == event


async def test_body_over_the_size_limit_is_413_and_nothing_lands(
    start_proxy, broker, topic, tmp_path
):
    event = run_event()
    event["job"]["facets"]["big"] = {"_producer": "p", "_schemaURL": "s", "x": "a" * 5000}
    routing = {"archive_root": tmp_path}
    async with start_proxy(server={"max_body_bytes": 4096}, routing=routing) as url:
        status, body, _ = await post(f"{url}/api/v1/lineage", event)
        landed = await landed_before_a_marker(
            url, broker.bootstrap_servers, topic, namespace="team-a", name="etl.daily"
        )
    assert status == 413 and "limit" in body["error"]
    assert landed == []
    [marker] = archive_run_ids(tmp_path)
    assert marker != event["run"]["runId"]


async def test_gzip_bomb_is_refused_with_413_without_inflating_it_all(start_proxy):
    bomb = gzip.compress(b'{"a":"' + b"0" * (20 * 1024 * 1024) + b'"}')
    assert len(bomb) < 100_000
    async with start_proxy(server={"max_decompressed_bytes": 1024 * 1024}) as url:
        status, body, _ = await post(f"{url}/api/v1/lineage", bomb, **{"Content-Encoding": "gzip"})
    assert status == 413 and "decompressed" in body["error"]


async def test_high_ratio_is_refused_even_under_the_absolute_limit(start_proxy):
    bomb = gzip.compress(b'{"a":"' + b"0" * (4 * 1024 * 1024) + b'"}')
    async with start_proxy(server={"max_gzip_ratio": 50}) as url:
        status, body, _ = await post(f"{url}/api/v1/lineage", bomb, **{"Content-Encoding": "gzip"})
    assert status == 413 and "ratio" in body["error"]


async def test_corrupt_gzip_is_400_and_unknown_encoding_is_415(start_proxy):
    async with start_proxy() as url:
        status, _, _ = await post(
            f"{url}/api/v1/lineage", b"garbage", **{"Content-Encoding": "gzip"}
        )
        assert status == 400
        status, _, _ = await post(f"{url}/api/v1/lineage", b"{}", **{"Content-Encoding": "br"})
        assert status == 415


AUTH = {
    "enabled": True,
    "tokens": [
        {"name": "team-a", "token": "secret-a", "namespaces": ["team-a*"]},
        {"name": "admin", "token": "secret-admin", "namespaces": ["*"]},
    ],
}


async def test_auth_requires_a_known_bearer_token(start_proxy, broker, topic):
    async with start_proxy(auth=AUTH) as url:
        endpoint = f"{url}/api/v1/lineage"
        status, _, headers = await post(endpoint, run_event())
        assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
        assert (await post(endpoint, run_event(), Authorization="Bearer wrong"))[0] == 401
        assert (await post(endpoint, run_event(), Authorization="Basic c2VjcmV0LWE="))[0] == 401
        ok = run_event(namespace="team-a-prod")
        assert (await post(endpoint, ok, Authorization="Bearer secret-a"))[0] == 200
    [record] = read_all_produced_so_far(broker.bootstrap_servers, topic)
    assert orjson.loads(record.value)["job"]["namespace"] == "team-a-prod"


async def test_token_scoped_to_a_namespace_gets_403_elsewhere(start_proxy, broker, topic):
    async with start_proxy(auth=AUTH) as url:
        status, body, _ = await post(
            f"{url}/api/v1/lineage", run_event(namespace="team-b"), Authorization="Bearer secret-a"
        )
        assert status == 403 and body["details"][0]["pointer"] == "/job/namespace"
        batch = [run_event(namespace="team-a"), run_event(namespace="team-b")]
        status, body, _ = await post(
            f"{url}/api/v1/lineage/batch", batch, Authorization="Bearer secret-a"
        )
        assert status == 200 and body["summary"]["successful"] == 1
        assert body["failed_events"][0]["index"] == 1
        assert body["failed_events"][0]["status"] == 403
        admin = run_event(namespace="team-b")
        assert (await post(f"{url}/api/v1/lineage", admin, Authorization="Bearer secret-admin"))[
            0
        ] == 200
    namespaces = sorted(
        orjson.loads(r.value)["job"]["namespace"]
        for r in read_all_produced_so_far(broker.bootstrap_servers, topic)
    )
    assert namespaces == ["team-a", "team-b"]


async def test_health_ready_and_metrics(start_proxy):
    async with start_proxy() as url, ClientSession() as session:
        assert (await session.get(f"{url}/healthz")).status == 200
        ready = await session.get(f"{url}/readyz")
        assert ready.status == 200 and (await ready.json())["destinations"] == {
            "kafka": True,
            "archive": True,
            "rejected": True,
            "rejected_archive": True,
        }
        await post(f"{url}/api/v1/lineage", run_event())
        await post(f"{url}/api/v1/lineage", {"eventTime": "bad"})
        text = await (await session.get(f"{url}/metrics")).text()
    assert 'lineage_proxy_events_accepted_total{kind="run"} 1.0' in text
    assert 'lineage_proxy_events_rejected_total{reason="invalid"} 1.0' in text
    assert "lineage_proxy_delivery_seconds_bucket" in text
