"""The gauges the Prometheus alerts of deploy/prometheus need: whether Kafka confirms
deliveries (`lineage_proxy_kafka_reachable`), the spool's limit
(`lineage_proxy_spool_max_bytes`, for a fill ratio that holds whatever max_bytes is), the
room on the spool's disk and the record of a spool a preStop drain left behind."""

from __future__ import annotations

import orjson
import pytest
from aiohttp import ClientSession
from prometheus_client.parser import text_string_to_metric_families

from proxy.destinations.kafka.spool import Spool
from proxy.destinations.kafka.stranded import write_record
from proxy.server.embedded_broker import free_port
from tests.conftest import ProxyFactory
from tests.support.paths import fresh_spool_directory
from tests.support.sample_events import run_event
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def _samples(text: str, name: str) -> dict[str, float]:
    """``name``'s samples by their (one) label's value."""
    return {
        next(iter(sample.labels.values()), ""): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


async def test_kafka_down_shows_unreachable_and_the_spool_limit(start_proxy_on: ProxyFactory):
    nowhere = f"127.0.0.1:{free_port()}"
    spool = {"max_bytes": 3_000_000, "after_seconds": 0.5, "directory": fresh_spool_directory()}
    kafka = {"create_topics": False, "producer": {"delivery.timeout.ms": 1000}, "spool": spool}
    async with start_proxy_on(bootstrap=nowhere, kafka=kafka) as url, ClientSession() as session:
        resp = await session.post(f"{url}/api/v1/lineage", data=orjson.dumps(run_event()))
        assert resp.status < 300, await resp.text()
        metrics = await (await session.get(f"{url}/metrics")).text()
    assert _samples(metrics, "lineage_proxy_kafka_reachable") == {nowhere: 0.0}
    assert list(_samples(metrics, "lineage_proxy_spool_max_bytes").values()) == [3_000_000]
    assert list(_samples(metrics, "lineage_proxy_spool_events").values()) == [1]


async def test_kafka_that_confirms_shows_reachable(start_proxy: ProxyFactory, broker):
    async with start_proxy() as url, ClientSession() as session:
        resp = await session.post(f"{url}/api/v1/lineage", data=orjson.dumps(run_event()))
        assert resp.status < 300, await resp.text()
        metrics = await (await session.get(f"{url}/metrics")).text()
    assert _samples(metrics, "lineage_proxy_kafka_reachable") == {broker.bootstrap_servers: 1.0}


async def test_a_stranded_spool_and_the_disk_under_it_are_reported(
    start_proxy_on: ProxyFactory,
):
    """A proxy started on a volume whose previous pod's preStop drain gave up reports the
    record it left (alert LineageProxySpoolStranded) while the events wait, and the room
    on the spool's file system (LineageProxyDiskFillingUp). Seen failing before the
    record and the disk gauges existed (neither series in /metrics)."""
    root = fresh_spool_directory()
    spool = Spool(root / "default", max_bytes=1 << 20, segment_bytes=1 << 16)
    await spool.open()
    await spool.append("openlineage.events", "run:ns/job", [], orjson.dumps(run_event()))
    await spool.close()
    write_record(root, [root / "default"], pod="lp-lineage-proxy-3", now=1_700_000_000)
    nowhere = f"127.0.0.1:{free_port()}"
    kafka = {"create_topics": False, "spool": {"directory": str(root)}}
    async with start_proxy_on(bootstrap=nowhere, kafka=kafka) as url, ClientSession() as session:

        async def reported() -> bool:
            text = await (await session.get(f"{url}/metrics")).text()
            return _samples(text, "lineage_proxy_spool_stranded_events") == {"": 1.0}

        await wait_for(reported, 30, "the stranded record in /metrics")
        metrics = await (await session.get(f"{url}/metrics")).text()
    assert _samples(metrics, "lineage_proxy_spool_stranded_timestamp_seconds") == {
        "": 1_700_000_000
    }
    size = _samples(metrics, "lineage_proxy_disk_size_bytes")
    available = _samples(metrics, "lineage_proxy_disk_available_bytes")
    assert list(size) == ["spool"] and 0 <= available["spool"] <= size["spool"]
    assert str(root) not in metrics  # no absolute paths in labels
