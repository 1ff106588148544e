"""Several daemons in one process (as `consume --all` runs them), each with /metrics and
/healthz showing delivered counts, lag per partition and the circuit state; /healthz is
503, saying why, while the circuit is open or Kafka is unreachable."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from consumers.run import running_daemons
from proxy.config.settings import ProxyConfig
from proxy.server.embedded_broker import EmbeddedBroker
from tests.support.brokers import kill
from tests.support.consumers import (
    FAST_BREAKER,
    FAST_RETRY,
    TEST_GROUP,
    create_topic,
    encoded,
    produce,
    sequenced_run_events,
)
from tests.support.doubles.datahub_double import DataHubDouble
from tests.support.doubles.marquez_double import MarquezDouble
from tests.support.metrics import total
from tests.support.ports import free_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with session.get(url) as resp:
        return resp.status, await resp.text()


async def _metrics_when_lag_is(session: aiohttp.ClientSession, base: str, lag: int) -> str:
    """/metrics once the summed lag gauge shows ``lag``. The gauge follows the daemon's
    own delivery position, published with the watermarks every ~2 s; waited for with the
    suite's one deadline contract (tests/support/waiting.py), a bound on a hang, not a
    timing claim: a fixed 20 s once ran out on a loaded machine after every event had
    reached the target."""
    metrics = ""

    async def shows_lag() -> bool:
        nonlocal metrics
        _, metrics = await _get(session, base + "/metrics")
        return total(metrics, "lineage_consumer_lag") == lag

    await wait_for(shows_lag, within=120, what=f"lineage_consumer_lag to be {lag}")
    return metrics


async def test_two_daemons_in_one_process_with_status_endpoints(broker, topic_with):
    topic = topic_with(3)
    events = sequenced_run_events(runs=4, per_run=5)
    port = free_port()
    async with MarquezDouble() as marquez, DataHubDouble(token="t") as datahub:
        common = {"topics": [topic], "group": TEST_GROUP, "circuit_breaker": FAST_BREAKER}
        config = ProxyConfig.model_validate(
            {
                "kafka": {"bootstrap_servers": broker.bootstrap_servers, "topic": topic},
                "consumers": {
                    "marquez": {
                        **common,
                        "target": {"kind": "marquez", "url": marquez.url, "retry": FAST_RETRY},
                        "status_port": port,
                    },
                    "datahub": {
                        **common,
                        "target": {
                            "kind": "datahub",
                            "url": datahub.url,
                            "auth": {"type": "bearer", "token": "t"},
                            "retry": FAST_RETRY,
                        },
                    },
                },
            }
        )
        await marquez.down()
        base = f"http://127.0.0.1:{port}"
        async with (
            running_daemons(config.consumers, config.kafka, ["marquez", "datahub"]),
            aiohttp.ClientSession() as session,
        ):
            await asyncio.to_thread(produce, broker.bootstrap_servers, topic, encoded(events))
            await wait_for(lambda: len(datahub.events) == len(events), what="datahub events")
            # Marquez is down: its daemon holds the events back and says so.
            await _metrics_when_lag_is(session, base, len(events))
            # The lag shows as soon as the brokers are asked where the partitions end; the
            # circuit opens after the failures that the breaker counts.
            answer: tuple[int, str] = (0, "")

            async def unhealthy() -> bool:
                nonlocal answer
                answer = await _get(session, base + "/healthz")
                return answer[0] == 503

            await wait_for(unhealthy, what="/healthz to be 503")
            status, body = answer
            health = json.loads(body)
            assert status == 503 and health["circuit"] in ("open", "half-open")
            [problem] = health["problems"]
            assert problem.startswith("circuit") and "connection" in problem.lower()
            await marquez.up()
            await wait_for(lambda: len(marquez.events) == len(events), what="marquez events")
            metrics = await _metrics_when_lag_is(session, base, 0)
            delivered = 'lineage_consumer_delivered_total{consumer="marquez"}'
            assert f"{delivered} {len(events)}.0" in metrics
            status, body = await _get(session, base + "/healthz")
            health = json.loads(body)
            assert status == 200 and health["status"] == "ok" and health["problems"] == []
            assert health["group"] == "lineage-proxy.marquez" and health["circuit"] == "closed"
            assert len(health["assigned"]) == 3 and set(health["lag"].values()) == {0}
    assert len(marquez.events) == len(datahub.events) == len(events)


async def test_healthz_is_503_while_kafka_is_unreachable_then_200_once_it_is_back(topic):
    """A daemon pointed at a port where no broker listens says so (and, past the session
    timeout, that it holds no partitions); once a broker listens there and the daemon
    joins, /healthz is 200 again without a restart."""
    port, kafka_port = free_port(), free_port()
    kafka = EmbeddedBroker(port=kafka_port)  # not started yet: nothing listens
    config = ProxyConfig.model_validate(
        {
            "kafka": {"bootstrap_servers": kafka.bootstrap_servers, "topic": topic},
            "consumers": {
                "marquez": {
                    "group": TEST_GROUP,
                    "target": {"kind": "marquez", "url": "http://127.0.0.1:9"},
                    "status_port": port,
                }
            },
        }
    )
    url = f"http://127.0.0.1:{port}/healthz"

    async def health_when(session, check) -> tuple[int, dict]:
        answer: tuple[int, dict] = (0, {})

        async def holds() -> bool:
            nonlocal answer
            status, body = await _get(session, url)
            answer = status, json.loads(body)
            return bool(check(*answer))

        await wait_for(holds, what="/healthz to answer as the test expects")
        return answer

    try:
        async with (
            running_daemons(config.consumers, config.kafka, ["marquez"]),
            aiohttp.ClientSession() as session,
        ):
            status, health = await health_when(session, lambda s, h: len(h["problems"]) == 2)
            assert status == 503
            unreachable, unassigned = health["problems"]
            assert unreachable.startswith("Kafka unreachable") and "brokers are down" in unreachable
            assert unassigned.startswith("no partitions assigned")

            await asyncio.to_thread(kafka.start)
            await asyncio.to_thread(create_topic, kafka.bootstrap_servers, topic, 1)
            status, health = await health_when(session, lambda s, h: s == 200)
            assert health["problems"] == [] and health["assigned"] == [f"{topic}[0]"]
    finally:
        kill(kafka)
