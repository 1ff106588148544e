"""The gauges the Prometheus alerts of deploy/prometheus need: whether Kafka confirms
deliveries (`lineage_proxy_kafka_reachable`) and the spool's limit
(`lineage_proxy_spool_max_bytes`, for a fill ratio that holds whatever max_bytes is)."""

from __future__ import annotations

import orjson
import pytest
from aiohttp import ClientSession
from prometheus_client.parser import text_string_to_metric_families

from proxy.embedded_broker import free_port
from tests.conftest import ProxyFactory
from tests.sample_events import run_event
from tests.support.paths import fresh_spool_directory

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
