"""A consumer pointed back at its own proxy: the event goes round once more, then the proxy
refuses it (HTTP 508, a hop count past one) and the consumer dead-letters it — a bounded
count, not one event becoming fifty."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from aiohttp import ClientSession

from proxy.destinations.hops import HEADER
from proxy.server.embedded_broker import free_port
from tests.support.consumers import consumer_config, metric, running
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.load import kafka_run_ids
from tests.support.sample_events import run_event
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


async def test_a_consumer_aimed_at_its_own_proxy_sends_an_event_round_once_then_dead_letters_it(
    start_proxy, broker, topic
):
    bootstrap = broker.bootstrap_servers
    event = run_event(name="loop")
    run_id = event["run"]["runId"]
    async with start_proxy(server={"run_consumers": []}) as url:
        async with ClientSession() as session:
            async with session.post(f"{url}/api/v1/lineage", data=orjson.dumps(event)) as resp:
                assert resp.status == 200
            # What the proxy says to an event that has been round too often.
            async with session.post(
                f"{url}/api/v1/lineage", data=orjson.dumps(event), headers={HEADER: "2"}
            ) as refused:
                refusal = await refused.json()
                assert refused.status == 508, refusal
        assert refusal["reason"] == "loop_detected"
        assert "point it at the real target" in refusal["error"]

        config = consumer_config(
            {"kind": "http", "url": f"{url}/api/v1/lineage"},
            topic,
            dead_letter={"enabled": True, "topic": "{topic}.dlq"},
        )
        async with running(bootstrap, config, "loop") as daemon:
            await wait_for(
                lambda: metric(daemon, "dead_lettered", why="refused") >= 1,
                within=60,
                what="the looped event dead-lettered",
            )
            delivered = metric(daemon, "delivered")
        found = await asyncio.to_thread(kafka_run_ids, bootstrap, topic)
        async with ClientSession() as session, session.get(f"{url}/metrics") as resp:
            metrics = await resp.text()
    # The client's copy and one round through the consumer; the second round was refused.
    assert found[run_id] == 2, found
    assert delivered == 1  # the one round the guard allows
    [letter] = await asyncio.to_thread(read_all_produced_so_far, bootstrap, f"{topic}.dlq")
    assert letter.headers["dlq_http_status"] == b"508", letter.headers
    assert 'reason="loop_detected"' in metrics


async def test_a_best_effort_route_aimed_at_its_own_proxy_goes_round_once(start_proxy, tmp_path):
    port = free_port()
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "version: 1\n"
        "destinations:\n"
        "  kafka: {kind: kafka}\n"
        "  back:\n"
        "    kind: http\n"
        "    required: false\n"
        f"    target: {{kind: http, url: 'http://127.0.0.1:{port}/api/v1/lineage'}}\n"
        "default: {to: [kafka, back]}\n"
    )
    async with start_proxy(server={"port": port}, routing={"rules": rules}) as url:
        async with (
            ClientSession() as session,
            session.post(
                f"{url}/api/v1/lineage", data=orjson.dumps(run_event(name="loop"))
            ) as resp,
        ):
            assert resp.status == 200
        refused = 'lineage_proxy_events_rejected_total{reason="loop_detected"}'
        await wait_for(
            lambda: _at_least_one(url, refused),
            within=60,
            what="the second round refused",
        )
        accepted = await _metric(url, "lineage_proxy_events_accepted_total")
    # The client's event and one round; the second round was refused, so nothing more.
    assert accepted == 2


async def _at_least_one(url: str, sample: str) -> bool:
    return await _metric(url, sample) >= 1


async def _metric(url: str, sample: str) -> float:
    """The sum of the samples starting with ``sample`` (0 when there is none)."""
    async with ClientSession() as session, session.get(f"{url}/metrics") as resp:
        text = await resp.text()
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(sample)
    )
