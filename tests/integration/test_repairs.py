"""Repaired events over HTTP: what the client hears and what lands in Kafka, named."""

from __future__ import annotations

import orjson
import pytest
from aiohttp import ClientSession

from tests.integration.test_lineage_endpoint import post
from tests.support.kafka_reader import read_all_produced_so_far, read_topic
from tests.support.sample_events import rich_run_event

pytestmark = pytest.mark.integration

NAIVE = "2026-11-23T10:00:00.123456"


async def test_naive_event_time_is_stored_with_utc_offset_and_named_in_body_and_header(
    start_proxy, broker, topic
):
    event = rich_run_event()
    event["eventTime"] = NAIVE
    async with start_proxy() as url:
        status, body, _ = await post(f"{url}/api/v1/lineage", event)
    assert status == 200
    expected = [
        {"repair": "naive_date_time", "pointer": "/eventTime", "from": NAIVE, "to": NAIVE + "Z"}
    ]
    assert body == {"status": "success", "repaired": expected}
    [record] = read_topic(broker.bootstrap_servers, topic, expect=1)
    assert orjson.loads(record.value)["eventTime"] == NAIVE + "Z"
    assert orjson.loads(record.headers["ol_repairs"]) == expected


async def test_batch_lists_repairs_per_index_and_valid_events_carry_no_repair_header(
    start_proxy, broker, topic
):
    valid, naive, bare_path = rich_run_event(), rich_run_event(), rich_run_event()
    naive["eventTime"] = NAIVE
    bare_path["inputs"][0]["facets"]["dataSource"]["uri"] = "/data/orders.csv"
    async with start_proxy() as url:
        status, body, _ = await post(f"{url}/api/v1/lineage/batch", [valid, naive, bare_path])
    assert status == 200
    assert body["summary"]["successful"] == 3
    assert body["repaired_events"] == [
        {
            "index": 1,
            "repairs": [
                {
                    "repair": "naive_date_time",
                    "pointer": "/1/eventTime",
                    "from": NAIVE,
                    "to": NAIVE + "Z",
                }
            ],
        },
        {
            "index": 2,
            "repairs": [
                {
                    "repair": "schemeless_datasource_uri",
                    "pointer": "/2/inputs/0/facets/dataSource/uri",
                    "from": "/data/orders.csv",
                    "to": "file:///data/orders.csv",
                }
            ],
        },
    ]
    records = read_topic(broker.bootstrap_servers, topic, expect=3)
    by_run = {orjson.loads(r.value)["run"]["runId"]: r for r in records}
    assert "ol_repairs" not in by_run[valid["run"]["runId"]].headers
    assert b"naive_date_time" in by_run[naive["run"]["runId"]].headers["ol_repairs"]
    stored = orjson.loads(by_run[bare_path["run"]["runId"]].value)
    assert stored["inputs"][0]["facets"]["dataSource"]["uri"] == "file:///data/orders.csv"


async def test_strict_mode_refuses_naive_event_time_and_nothing_lands(start_proxy, broker, topic):
    event = rich_run_event()
    event["eventTime"] = NAIVE
    async with start_proxy(validation={"mode": "strict"}) as url:
        status, body, _ = await post(f"{url}/api/v1/lineage", event)
    assert status == 400
    assert [d["pointer"] for d in body["details"]] == ["/eventTime"]
    assert read_all_produced_so_far(broker.bootstrap_servers, topic) == []


async def test_repairs_are_counted_by_name_in_metrics(start_proxy):
    event = rich_run_event()
    event["run"]["facets"]["nominalTime"]["nominalStartTime"] = "2020-01-01"
    async with start_proxy() as url:
        assert (await post(f"{url}/api/v1/lineage", event))[0] == 200
        async with ClientSession() as session, session.get(f"{url}/metrics") as resp:
            text = await resp.text()
    assert 'lineage_proxy_events_repaired_total{repair="date_only_nominal_time"} 1.0' in text
