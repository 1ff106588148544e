"""A broker paused or replaced under load: the proxy recovers by itself, without restart.

librdkafka's idempotent producer can end up fenced or fatally broken when the broker
forgets it (DESIGN §8); the proxy must notice, build a new producer, and serve 2xx again
within 30 s of the broker answering — with every acknowledged event in Kafka."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from aiohttp import ClientError, ClientSession, ClientTimeout
from confluent_kafka.admin import AdminClient, NewTopic

from proxy.server.embedded_broker import EmbeddedBroker
from tests.support.brokers import kill
from tests.support.figures import report
from tests.support.load import LoadResult, compare, kafka_run_ids, post_events
from tests.support.sample_events import run_event
from tests.support.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RECOVERY_SECONDS = 30
# These tests are about the producer itself: without a spool, every answer while the
# broker cannot confirm is a 503 and /readyz says so (test_spool_outage.py has the spool).
NO_SPOOL = {"spool": {"enabled": False}}


async def _readiness(session: ClientSession, url: str) -> int | str:
    try:
        async with session.get(f"{url}/readyz", timeout=ClientTimeout(total=10)) as resp:
            return resp.status
    except (ClientError, TimeoutError) as exc:
        return type(exc).__name__


async def _watch_readiness(session: ClientSession, url: str, seconds: float) -> list[int | str]:
    """/readyz once a second for ``seconds``."""
    statuses = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        statuses.append(await _readiness(session, url))
        await asyncio.sleep(1)
    return statuses


async def _ready_within(session: ClientSession, url: str, seconds: float) -> bool:
    async def ready() -> bool:
        return await _readiness(session, url) == 200

    return await eventually(ready, within=seconds, interval=0.5)


def _recovery(load: LoadResult, since: float) -> float | None:
    first = load.first_success_after(since)
    return None if first is None else round(first - since, 2)


async def test_broker_paused_then_resumed_serves_2xx_again_without_restart(
    start_proxy_on, dedicated_broker: EmbeddedBroker, topic
):
    pid = dedicated_broker.pid
    assert pid is not None
    async with (
        start_proxy_on(bootstrap=dedicated_broker.bootstrap_servers, kafka=NO_SPOOL) as url,
        ClientSession() as probe,
    ):

        async def pause_for_ten_seconds() -> tuple[list[int | str], float]:
            await asyncio.sleep(2)
            os.kill(pid, signal.SIGSTOP)
            readiness = await _watch_readiness(probe, url, 10)
            os.kill(pid, signal.SIGCONT)
            return readiness, time.monotonic()

        load, (readiness_while_paused, resumed_at) = await asyncio.gather(
            post_events(url, (run_event() for _ in range(700)), pause_seconds=0.25),
            pause_for_ten_seconds(),
        )
        ready_again = await _ready_within(probe, url, RECOVERY_SECONDS)
    found = await asyncio.to_thread(kafka_run_ids, dedicated_broker.bootstrap_servers, topic)
    figures = report(
        "broker_sigstop_10s_then_sigcont",
        sent=load.sent,
        statuses=dict(load.statuses),
        seconds_to_recover=_recovery(load, resumed_at),
        readiness_while_paused=readiness_while_paused,
        **compare(load.acknowledged, found),
    )
    assert figures["lost"] == 0 and figures["duplicates"] == 0
    assert set(load.statuses) <= {200, 503}, load.statuses
    assert 503 in readiness_while_paused
    assert ready_again
    assert figures["seconds_to_recover"] is not None
    assert figures["seconds_to_recover"] <= RECOVERY_SECONDS


async def test_broker_replaced_on_same_address_serves_2xx_again_and_loses_nothing(
    start_proxy_on, dedicated_broker: EmbeddedBroker, topic
):
    first_broker = dedicated_broker
    async with (
        start_proxy_on(bootstrap=first_broker.bootstrap_servers, kafka=NO_SPOOL) as url,
        ClientSession() as probe,
    ):
        # What the first broker holds is read before it dies (it keeps nothing on disk).
        before = await post_events(url, (run_event() for _ in range(200)))
        found_first = await asyncio.to_thread(kafka_run_ids, first_broker.bootstrap_servers, topic)
        second_broker = EmbeddedBroker(first_broker.port)

        async def replace_broker() -> tuple[list[int | str], float, float]:
            await asyncio.sleep(2)
            assert first_broker.pid is not None
            os.kill(first_broker.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            readiness = await _watch_readiness(probe, url, 3)
            await asyncio.to_thread(second_broker.start)
            # A replaced broker of a real cluster still has the topic: create it again.
            admin = AdminClient({"bootstrap.servers": second_broker.bootstrap_servers})
            await asyncio.to_thread(admin.create_topics([NewTopic(topic, 3, 1)])[topic].result, 10)
            return readiness, killed_at, time.monotonic()

        try:
            load, (readiness_while_down, killed_at, up_at) = await asyncio.gather(
                post_events(url, (run_event() for _ in range(800)), pause_seconds=0.25),
                replace_broker(),
            )
            ready_again = await _ready_within(probe, url, RECOVERY_SECONDS)
            acked = load.acknowledged_at()
            after_up = [run_id for t, run_id in acked if t >= up_at]
            # Sent to a dead broker and answered 2xx long after it died: a false promise.
            while_down = [run_id for t, run_id in acked if killed_at + 1 < t < up_at]
            found_second = await asyncio.to_thread(
                kafka_run_ids, second_broker.bootstrap_servers, topic
            )
        finally:
            kill(second_broker)
    first = compare(before.acknowledged, found_first)
    second = compare(after_up, found_second)
    figures = report(
        "broker_killed_and_replaced_on_same_address",
        sent=before.sent + load.sent,
        statuses=dict(load.statuses),
        # Checked: acknowledged before the load began (read from the first broker) and
        # after the new broker was up (read from it); the first broker's last seconds
        # died with it (memory only) and cannot be checked.
        acknowledged=first["acknowledged"] + second["acknowledged"],
        found=first["found"] + second["found"],
        lost=first["lost"] + second["lost"],
        duplicates=first["duplicates"] + second["duplicates"],
        acknowledged_not_checkable=len(acked) - len(after_up),
        acknowledged_while_down=len(while_down),
        seconds_to_recover=_recovery(load, up_at),
        readiness_while_down=readiness_while_down,
    )
    assert before.statuses == {200: 200}
    assert figures["lost"] == 0 and figures["duplicates"] == 0
    assert while_down == []
    assert set(load.statuses) <= {200, 503}, load.statuses
    assert 503 in readiness_while_down
    assert ready_again
    assert figures["seconds_to_recover"] is not None
    assert figures["seconds_to_recover"] <= RECOVERY_SECONDS
