"""Durable through a Kafka outage: what the broker cannot confirm is fsynced to the local
spool (2xx + X-Lineage-Spooled), then forwarded in order per key once a broker answers.

Real broker processes, real files; every test compares what clients were told (2xx) with
what landed in Kafka."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from collections import Counter, defaultdict
from typing import Any

import orjson
import pytest
import requests
from aiohttp import ClientSession

from proxy.destinations.kafka.destination import event_headers
from proxy.kafka.order_stamp import ORDER_HEADER
from proxy.openlineage import event_key
from proxy.server.embedded_broker import EmbeddedBroker
from tests.support.brokers import kill, running_broker
from tests.support.figures import report
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.load import LoadResult, compare, kafka_run_ids, post_events
from tests.support.metrics import fetch_metrics, sample
from tests.support.paths import fresh_spool_directory
from tests.support.ports import free_port
from tests.support.processes import ServeProcess, serve_process, wait_until_alive
from tests.support.sample_events import event_identity, one_run, run_event
from tests.support.waiting import eventually, wait_until

pytestmark = pytest.mark.integration

DRAIN_SECONDS = 60
# How many times the spooling proxy is killed mid-load before Kafka comes back.
KILLS = 3


def _spool(**values: Any) -> dict[str, Any]:
    return {"spool": {"directory": fresh_spool_directory(), **values}}


def _chain(job: str, count: int) -> list[dict[str, Any]]:
    """``count`` events of one run (one message key), to be sent one after another."""
    return one_run(job, ["START", *["RUNNING"] * (count - 2), "COMPLETE"])


async def _post_chains(url: str, chains: list[list[dict[str, Any]]]) -> list[LoadResult]:
    """One client per chain, each posting its chain in order; chains run concurrently.
    ``acknowledged`` holds event identities (``{runId}@{eventTime}``)."""
    return list(
        await asyncio.gather(
            *(post_events(url, c, concurrency=1, identify=event_identity) for c in chains)
        )
    )


async def _spool_status(url: str) -> dict[str, Any]:
    async with ClientSession() as session, session.get(f"{url}/readyz") as resp:
        body = await resp.json()
        return {"status": resp.status, **body.get("details", {}).get("kafka", {})}


async def _drained_within(url: str, seconds: float) -> float | None:
    """Seconds until the spool was empty (``None``: not within ``seconds``)."""

    async def spool_empty() -> bool:
        return bool((await _spool_status(url)).get("events") == 0)

    started = time.monotonic()
    if await eventually(spool_empty, within=seconds, interval=0.25):
        return round(time.monotonic() - started, 2)
    return None


async def test_broker_absent_at_start_events_are_spooled_then_arrive_in_order_with_keys(
    start_proxy_on, topic
):
    port = free_port()
    chains = [_chain(f"job-{i}", 63) for i in range(32)]  # 2,016 events, 32 keys
    async with start_proxy_on(bootstrap=f"127.0.0.1:{port}", kafka=_spool()) as url:
        async with ClientSession() as session:
            probe = run_event(name="probe")
            async with session.post(f"{url}/api/v1/lineage", data=orjson.dumps(probe)) as first:
                spooled_header = first.headers.get("X-Lineage-Spooled")
                first_status = first.status
        started = time.monotonic()
        loads = await _post_chains(url, chains)
        spooling_seconds = time.monotonic() - started
        while_down = await _spool_status(url)
        with running_broker(port) as broker:
            drain_seconds = await _drained_within(url, DRAIN_SECONDS)
            acked = [event_identity(probe), *(r for load in loads for r in load.acknowledged)]
            records = await asyncio.to_thread(
                read_all_produced_so_far, broker.bootstrap_servers, topic
            )
    found: Counter[str] = Counter()
    order: dict[str, list[str]] = defaultdict(list)
    for record in records:
        identity = event_identity(orjson.loads(record.value))
        found[identity] += 1
        order[record.key or ""].append(identity)
    figures = report(
        "spool_broker_absent_at_start",
        sent=sum(load.sent for load in loads),
        statuses=dict(sum((load.statuses for load in loads), start=type(loads[0].statuses)())),
        events_per_second_spooling=round(len(acked) / spooling_seconds),
        seconds_to_drain=drain_seconds,
        **compare(acked, found),
    )
    assert first_status == 200 and spooled_header == "true"
    # Kafka never answered since start: spooling, but not ready (a bad rollout stays red).
    assert while_down["status"] == 503 and while_down["spooling"] is True
    assert all(load.statuses == {200: 63} for load in loads)
    assert drain_seconds is not None
    assert figures["lost"] == 0 and figures["duplicates"] == 0
    for chain, load in zip(chains, loads, strict=True):
        assert order[event_key(chain[0]) or ""] == load.acknowledged  # order per key kept
    # The same key and headers as a direct send would have given, and the order stamp.
    sent = {event_identity(e): e for chain in chains for e in chain} | {
        event_identity(probe): probe
    }
    for record in records:
        event = sent[event_identity(orjson.loads(record.value))]
        assert record.key == event_key(event)
        stamp = record.headers.pop(ORDER_HEADER)
        assert record.headers == dict(event_headers(event)) and int(stamp) > 0


@pytest.mark.slow
async def test_broker_killed_mid_load_and_replaced_every_event_acknowledged_after_is_found(
    start_proxy_on, topic
):
    first = EmbeddedBroker(port=free_port()).start()
    port = first.port
    try:
        async with start_proxy_on(bootstrap=first.bootstrap_servers, kafka=_spool()) as url:
            second = EmbeddedBroker(port)

            async def kill_and_replace() -> tuple[float, float]:
                await asyncio.sleep(1.5)
                assert first.pid is not None
                os.kill(first.pid, signal.SIGKILL)
                killed_at = time.monotonic()
                await asyncio.sleep(3)
                await asyncio.to_thread(second.start)
                return killed_at, time.monotonic()

            try:
                load, (killed_at, up_at) = await asyncio.gather(
                    post_events(url, (run_event() for _ in range(900)), pause_seconds=0.2),
                    kill_and_replace(),
                )
                drain_seconds = await _drained_within(url, DRAIN_SECONDS)
                acked = load.acknowledged_at()
                # Answered once the first broker was surely gone: spooled or sent to the
                # second one — either way they must be in the second broker.
                after_kill = [run_id for t, run_id in acked if t > killed_at + 1]
                found = await asyncio.to_thread(kafka_run_ids, second.bootstrap_servers, topic)
            finally:
                kill(second)
    finally:
        kill(first)
    checked = compare(after_kill, found)
    figures = report(
        "spool_broker_killed_mid_load_and_replaced",
        sent=load.sent,
        statuses=dict(load.statuses),
        acknowledged_before_kill_not_checkable=len(acked) - len(after_kill),
        seconds_down=round(up_at - killed_at, 2),
        seconds_to_drain=drain_seconds,
        **checked,
    )
    assert load.statuses == {200: load.sent}
    assert len(after_kill) > 100
    assert drain_seconds is not None
    assert figures["lost"] == 0


@pytest.mark.slow
async def test_proxy_killed_while_spooling_again_and_again_loses_no_acknowledged_event(topic):
    """Kafka is down; the proxy spools a load from 32 clients and gets SIGKILL while
    requests are in flight, once a random number of them were answered — KILLS times,
    restarted on the same spool each time. Then Kafka comes up and one more start drains
    the spool: every event that got a 2xx from any of the killed processes is in Kafka.

    The kill is decided on the clients' own loop at the answer that reaches the count, and
    only while a request is on the wire, so every round kills mid-request whatever the
    machine's speed (a kill chosen by polling once missed the load and found [0, 230, 15]
    requests unanswered)."""
    port = free_port()
    spool_dir = fresh_spool_directory()
    settings = {
        "kafka__topic": topic,
        "kafka__spool__directory": str(spool_dir),
        # Kafka is known to be down from the first failed attempt: spool at once.
        "kafka__spool__after_seconds": "0.2",
        "kafka__create_topics": "false",
        "server__run_consumers": "[]",
    }
    seed = random.randrange(2**32)
    points = random.Random(seed)
    loads: list[LoadResult] = []
    in_flight_at_kill: list[int] = []
    cut_tails = 0
    for _ in range(KILLS):
        proxy, url = serve_process(f"127.0.0.1:{port}", **settings)
        try:
            await asyncio.to_thread(wait_until_alive, url, proxy)
            load = LoadResult()
            loads.append(load)
            kill = _KillAt(proxy, points.randrange(10, 300))
            # More events than any kill point: the load is still running at the kill.
            await post_events(url, (run_event() for _ in range(2000)), into=load, on_answer=kill)
            in_flight_at_kill.append(kill.in_flight)
        finally:
            if proxy.poll() is None:
                proxy.kill()
            await asyncio.to_thread(proxy.wait, 30)
        cut_tails += "cut off" in proxy.log()
    with running_broker(port) as broker:
        restarted, url = serve_process(broker.bootstrap_servers, **settings)
        try:
            started = time.monotonic()
            await asyncio.to_thread(
                wait_until,
                lambda: sample(fetch_metrics(url), "lineage_proxy_spool_events") == 0,
                120,
                "the spool drained",
                alive=restarted,
                ignoring=requests.RequestException,
            )
            drain_seconds = round(time.monotonic() - started, 2)
            found = await asyncio.to_thread(kafka_run_ids, broker.bootstrap_servers, topic)
        finally:
            restarted.kill()
            restarted.wait(30)
    acknowledged = [run_id for load in loads for run_id in load.acknowledged]
    figures = report(
        "spool_proxy_sigkilled_mid_load_repeatedly",
        seed=seed,
        kills=KILLS,
        sent=sum(load.sent for load in loads),
        statuses=dict(sum((load.statuses for load in loads), Counter())),
        in_flight_at_kill=in_flight_at_kill,
        torn_tails_cut_at_restart=cut_tails,
        seconds_to_drain_after_restart=drain_seconds,
        **compare(acknowledged, found),
    )
    # Killed mid-load each time: requests on the wire, some acknowledged.
    assert all(load.acknowledged for load in loads)
    assert all(n > 0 for n in in_flight_at_kill), in_flight_at_kill
    assert figures["lost"] == 0, figures


class _KillAt:
    """``on_answer`` for :func:`post_events`: SIGKILL the proxy at the first answer after
    which ``answers`` 2xx are in and a request is still on the wire; then stop the load.
    ``in_flight`` is how many requests the kill cut."""

    def __init__(self, proxy: ServeProcess, answers: int) -> None:
        self.proxy, self.answers, self.in_flight = proxy, answers, 0

    def __call__(self, load: LoadResult) -> bool:
        if self.in_flight:
            return True
        if len(load.acknowledged) >= self.answers and load.in_flight > 0:
            self.in_flight = load.in_flight
            self.proxy.kill()
            return True
        return False


async def test_full_spool_answers_503_and_everything_acknowledged_is_delivered(
    start_proxy_on, topic
):
    port = free_port()
    event_bytes = len(orjson.dumps(run_event()))
    spool = _spool(max_bytes=40 * (event_bytes + 300))
    async with start_proxy_on(bootstrap=f"127.0.0.1:{port}", kafka=spool) as url:
        load = await post_events(url, (run_event() for _ in range(100)), concurrency=4)
        async with (
            ClientSession() as session,
            session.post(f"{url}/api/v1/lineage", data=orjson.dumps(run_event())) as refused,
        ):
            retry_after = refused.headers.get("Retry-After")
            refused_status = refused.status
        with running_broker(port) as broker:
            drain_seconds = await _drained_within(url, DRAIN_SECONDS)
            found = await asyncio.to_thread(kafka_run_ids, broker.bootstrap_servers, topic)
    figures = report(
        "spool_full",
        sent=load.sent,
        statuses=dict(load.statuses),
        seconds_to_drain=drain_seconds,
        **compare(load.acknowledged, found),
    )
    assert refused_status == 503 and retry_after is not None
    assert set(load.statuses) == {200, 503} and 20 <= load.statuses[200] <= 60
    assert figures["lost"] == 0 and figures["found"] == figures["acknowledged"]
