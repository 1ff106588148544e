"""Broker faults on a real 3-broker Apache Kafka cluster under load: 0 acknowledged lost.

Replication factor 3 and ``min.insync.replicas=2`` (tests/support/kafka_cluster.py): a 2xx
from the proxy means at least two brokers have the event, so losing one broker — killed,
paused, or the controller — loses nothing that was acknowledged, and the proxy serves 2xx
again by itself once the cluster has moved the partition leaders (no proxy restart).
Two of three brokers down leaves a partition with one in-sync replica: the brokers refuse
acks=all writes (NOT_ENOUGH_REPLICAS), the spool takes the events and drains them in order
per key when a broker returns. The whole cluster stopped and started again from its log
directories still has everything it acknowledged.

These tests share one cluster per module (a start costs ~30 JVM-seconds); each leaves it
whole again (every node running and registered), and ``whole_cluster`` checks that first.
"""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession, ClientTimeout

from tests.support.figures import report
from tests.support.kafka_cluster import KafkaCluster
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.load import LoadResult, compare, kafka_run_ids, post_events
from tests.support.sample_events import facet, run_event
from tests.support.tiers import starts
from tests.support.waiting import wait_for

# Cluster starts and broker restarts are minutes of JVM time on a loaded 2-core machine.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

RECOVERY_SECONDS = 30
# The producer itself is under test: without a spool every answer while Kafka cannot
# confirm is a 503, so a 2xx is a confirmed acks=all write to at least two brokers.
NO_SPOOL = {"spool": {"enabled": False}}


def _heal(cluster: KafkaCluster) -> None:
    for node in cluster.nodes:
        cluster.resume(node.node_id)
    for node in cluster.nodes:
        if not node.running():
            cluster.start_node(node.node_id)
    cluster.wait_for_brokers(len(cluster.nodes), 120)


@pytest.fixture(scope="module")
@starts("a private Apache Kafka cluster (JVMs)")
def fault_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    directory = tmp_path_factory.mktemp("fault-kafka")
    cluster = KafkaCluster(directory, brokers=3).start()
    try:
        yield cluster
    finally:
        cluster.kill_all()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
async def whole_cluster(fault_cluster: KafkaCluster) -> AsyncIterator[KafkaCluster]:
    """The module's cluster with every node up, made whole again after the test."""
    await asyncio.to_thread(_heal, fault_cluster)
    try:
        yield fault_cluster
    finally:
        await asyncio.to_thread(_heal, fault_cluster)


def _seconds_to_recover(load: LoadResult, since: float) -> float | None:
    """Seconds from ``since`` until the answers were 2xx for good: the first 2xx after the
    last failure (0 when nothing failed); None when the load ended still failing."""
    after = sorted((t, s) for t, s in load.answers if t >= since)
    failures = [t for t, s in after if not (isinstance(s, int) and 200 <= s < 300)]
    if not failures:
        return 0.0
    recovered = load.first_success_after(failures[-1])
    return None if recovered is None else round(recovered - since, 2)


async def _all_2xx(url: str, count: int) -> LoadResult:
    load = await post_events(url, (run_event() for _ in range(count)))
    assert set(load.statuses) == {200}, load.statuses
    return load


async def _fault_under_load(
    url: str, fault: Any, *, events: int = 2400, pause: float = 0.5
) -> tuple[LoadResult, Any]:
    """32 clients post ``events`` (each waits ``pause`` between its requests, so the load
    lasts well past the fault) while ``fault()`` runs 2 s into it."""

    async def delayed() -> Any:
        await asyncio.sleep(2)  # load shaping: the fault hits a proxy already under load
        return await fault()

    load, outcome = await asyncio.gather(
        post_events(url, (run_event() for _ in range(events)), pause_seconds=pause),
        delayed(),
    )
    return load, outcome


async def test_partition_leader_sigkilled_under_load_then_restarted_loses_nothing(
    start_proxy_on, whole_cluster: KafkaCluster, topic
):
    cluster = whole_cluster
    async with start_proxy_on(bootstrap=cluster.bootstrap_servers, kafka=NO_SPOOL) as url:
        before = await _all_2xx(url, 64)
        leader = await asyncio.to_thread(cluster.leader_of, topic, 0)

        async def kill_then_restart() -> tuple[float, float]:
            await asyncio.to_thread(cluster.kill, leader)
            killed_at = time.monotonic()
            await wait_for(
                lambda: leader not in cluster.registered_brokers(), within=60, what="fencing"
            )
            await asyncio.to_thread(cluster.start_node, leader)
            return killed_at, time.monotonic()

        load, (killed_at, restarted_at) = await _fault_under_load(url, kill_then_restart)
        after = await _all_2xx(url, 64)
    found = await asyncio.to_thread(kafka_run_ids, cluster.bootstrap_servers, topic)
    figures = report(
        "kafka_partition_leader_sigkill_32_clients",
        sent=before.sent + load.sent + after.sent,
        statuses=dict(load.statuses),
        killed_node=leader,
        seconds_to_recover=_seconds_to_recover(load, killed_at),
        seconds_to_restart_broker=round(restarted_at - killed_at, 1),
        **compare(before.acknowledged + load.acknowledged + after.acknowledged, found),
    )
    assert figures["lost"] == 0
    assert set(load.statuses) <= {200, 503}, load.statuses
    assert figures["seconds_to_recover"] is not None, "still failing when the load ended"
    assert figures["seconds_to_recover"] <= RECOVERY_SECONDS


@pytest.mark.parametrize(
    "seconds", [8, pytest.param(60, marks=pytest.mark.long)], ids=["8s", "60s"]
)
async def test_broker_sigstopped_under_load_loses_nothing(
    start_proxy_on, whole_cluster: KafkaCluster, topic, seconds: int
):
    cluster = whole_cluster
    async with start_proxy_on(bootstrap=cluster.bootstrap_servers, kafka=NO_SPOOL) as url:
        before = await _all_2xx(url, 64)
        paused = await asyncio.to_thread(cluster.leader_of, topic, 0)

        async def pause() -> float:
            cluster.pause(paused)
            await asyncio.sleep(seconds)  # the fault itself lasts this long
            cluster.resume(paused)
            return time.monotonic()

        load, resumed_at = await _fault_under_load(
            url, pause, events=max(2400, 64 * (seconds + 30)), pause=0.5
        )
        await asyncio.to_thread(cluster.wait_for_brokers, 3, 120, paused)
        after = await _all_2xx(url, 64)
    found = await asyncio.to_thread(kafka_run_ids, cluster.bootstrap_servers, topic)
    paused_at = resumed_at - seconds
    figures = report(
        f"kafka_broker_sigstop_{seconds}s_32_clients",
        sent=before.sent + load.sent + after.sent,
        statuses=dict(load.statuses),
        paused_node=paused,
        seconds_to_recover=_seconds_to_recover(load, paused_at),
        **compare(before.acknowledged + load.acknowledged + after.acknowledged, found),
    )
    assert figures["lost"] == 0
    assert set(load.statuses) <= {200, 503}, load.statuses
    assert figures["seconds_to_recover"] is not None, "still failing when the load ended"
    assert figures["seconds_to_recover"] <= seconds + RECOVERY_SECONDS


async def test_active_controller_sigkilled_under_load_loses_nothing(
    start_proxy_on, whole_cluster: KafkaCluster, topic
):
    cluster = whole_cluster
    async with start_proxy_on(bootstrap=cluster.bootstrap_servers, kafka=NO_SPOOL) as url:
        before = await _all_2xx(url, 64)
        controller = cluster.active_controller()
        assert controller is not None

        async def kill_then_restart() -> float:
            await asyncio.to_thread(cluster.kill, controller)
            killed_at = time.monotonic()
            # A new quorum leader is elected among the two left.
            await wait_for(
                lambda: cluster.active_controller() not in (None, controller),
                within=60,
                what="election",
            )
            await asyncio.to_thread(cluster.start_node, controller)
            return killed_at

        load, killed_at = await _fault_under_load(url, kill_then_restart)
        after = await _all_2xx(url, 64)
        new_controller = cluster.active_controller()
    found = await asyncio.to_thread(kafka_run_ids, cluster.bootstrap_servers, topic)
    figures = report(
        "kafka_active_controller_sigkill_32_clients",
        sent=before.sent + load.sent + after.sent,
        statuses=dict(load.statuses),
        killed_controller=controller,
        controller_after=new_controller,
        seconds_to_recover=_seconds_to_recover(load, killed_at),
        **compare(before.acknowledged + load.acknowledged + after.acknowledged, found),
    )
    assert figures["lost"] == 0
    assert set(load.statuses) <= {200, 503}, load.statuses
    assert figures["seconds_to_recover"] is not None, "still failing when the load ended"
    assert figures["seconds_to_recover"] <= RECOVERY_SECONDS


async def test_whole_cluster_stopped_and_restarted_keeps_everything_acknowledged(
    start_proxy_on, whole_cluster: KafkaCluster, topic
):
    cluster = whole_cluster
    async with start_proxy_on(bootstrap=cluster.bootstrap_servers) as url:
        before = await _all_2xx(url, 300)
        began = time.monotonic()
        await asyncio.to_thread(cluster.stop)
        stopped_at = time.monotonic()
        # While the cluster is down the spool answers: 2xx, each event fsynced locally.
        during = await _all_2xx(url, 100)
        await asyncio.to_thread(cluster.start)
        started_at = time.monotonic()
        await wait_for(lambda: _spool_empty(url), within=120, what="spool drained")
        drained_at = time.monotonic()
        after = await _all_2xx(url, 64)
    found = await asyncio.to_thread(kafka_run_ids, cluster.bootstrap_servers, topic)
    figures = report(
        "kafka_whole_cluster_stop_start_from_log_dirs",
        sent=before.sent + during.sent + after.sent,
        seconds_to_stop=round(stopped_at - began, 1),
        seconds_to_start=round(started_at - stopped_at, 1),
        seconds_to_recover=round(drained_at - stopped_at, 1),
        acknowledged_before_stop=len(before.acknowledged),
        found_of_those=len(set(before.acknowledged) & set(found)),
        **compare(before.acknowledged + during.acknowledged + after.acknowledged, found),
    )
    # Persistence: what the brokers acknowledged before the stop came back from disk.
    assert figures["found_of_those"] == len(before.acknowledged)
    assert figures["lost"] == 0


async def _spool_empty(url: str) -> bool:
    return await _spooled_events(url) == 0


async def _readyz(url: str) -> tuple[int, dict[str, Any]]:
    async with (
        ClientSession(timeout=ClientTimeout(total=10)) as session,
        session.get(f"{url}/readyz") as resp,
    ):
        return resp.status, orjson.loads(await resp.read())


async def _spooled_events(url: str) -> int:
    _, body = await _readyz(url)
    spools = [d for d in _destination_details(body) if "spooling" in d]
    # Destinations of one cluster share its spool: each reports the same figures.
    return max((int(d["events"]) for d in spools), default=0)


def _destination_details(body: dict[str, Any]) -> list[dict[str, Any]]:
    return list(body.get("details", {}).values())


# --- two of three brokers down: NOT_ENOUGH_REPLICAS ------------------------------------


@pytest.fixture(scope="module")
@starts("a private Apache Kafka cluster (JVMs)")
def controller_apart(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """3 brokers whose KRaft quorum lives on node 1 only, as when controllers run on
    machines of their own: brokers 2 and 3 can die while the controller goes on, fences
    them and shrinks every partition's in-sync replicas to {1}. (With three combined
    nodes, two down is a lost quorum: nothing is fenced and writes time out instead.)"""
    directory = tmp_path_factory.mktemp("kafka-controller-apart")
    cluster = KafkaCluster(directory, brokers=3, controllers=1).start()
    try:
        yield cluster
    finally:
        cluster.kill_all()
        shutil.rmtree(directory, ignore_errors=True)


RUNS, PER_RUN = 8, 12
# One runId per run (one Kafka key each).
_RUN_IDS = [str(uuid.uuid4()) for _ in range(RUNS)]


def _sequenced(run: int, n: int) -> dict[str, Any]:
    event = run_event(name=f"job{run}", run_id=_RUN_IDS[run])
    event["run"]["facets"]["seq"] = {**facet("Seq"), "n": n}
    return event


async def _post_in_order(url: str, first: int, last: int) -> list[tuple[int, int]]:
    """Post events ``first``..``last`` of every run, each run from its own client in
    order (a run's next event only after the last one's answer); returns (run, n) of
    every 2xx."""
    acked: list[tuple[int, int]] = []

    async def one_run(session: ClientSession, run: int) -> None:
        for n in range(first, last):
            body = orjson.dumps(_sequenced(run, n))
            async with session.post(f"{url}/api/v1/lineage", data=body) as resp:
                assert resp.status == 200, await resp.text()
                acked.append((run, n))

    async with ClientSession(timeout=ClientTimeout(total=30)) as session:
        await asyncio.gather(*(one_run(session, r) for r in range(RUNS)))
    return acked


async def test_two_of_three_brokers_down_spool_takes_events_and_drains_in_order_per_key(
    start_proxy_on, controller_apart: KafkaCluster, topic
):
    cluster = controller_apart
    await asyncio.to_thread(_heal, cluster)
    async with start_proxy_on(bootstrap=cluster.bootstrap_servers) as url:
        acked = await _post_in_order(url, 0, 4)
        for node in (2, 3):
            await asyncio.to_thread(cluster.kill, node)
        down_at = time.monotonic()
        await wait_for(lambda: cluster.registered_brokers() == {1}, within=60, what="fencing")
        acked += await _post_in_order(url, 4, PER_RUN - 2)

        async def told_why() -> bool:
            # Readiness answers from a background check of the cluster (every second):
            # what Kafka said shows once the first check after the spooling ran.
            return "NOT_ENOUGH_REPLICAS" in orjson.dumps((await _readyz(url))[1]).decode()

        await wait_for(told_why, within=30, what="/readyz to say why Kafka refuses")
        status, body = await _readyz(url)
        spooled = await _spooled_events(url)
        async with ClientSession() as session, session.get(f"{url}/api/v1/status") as resp:
            page = await resp.text()
        await asyncio.to_thread(cluster.start_node, 2)
        back_at = time.monotonic()
        await wait_for(lambda: _spool_empty(url), within=120, what="spool drained")
        drained_at = time.monotonic()
        acked += await _post_in_order(url, PER_RUN - 2, PER_RUN)
    await asyncio.to_thread(cluster.start_node, 3)
    records = await asyncio.to_thread(read_all_produced_so_far, cluster.bootstrap_servers, topic)
    by_key: dict[str, list[int]] = defaultdict(list)
    run_of_key: dict[str, int] = {}
    for record in records:
        event = orjson.loads(record.value)
        by_key[str(record.key)].append(event["run"]["facets"]["seq"]["n"])
        run_of_key[str(record.key)] = int(event["job"]["name"].removeprefix("job"))
    found = {(run_of_key[k], n) for k, ns in by_key.items() for n in ns}
    figures = report(
        "kafka_two_of_three_brokers_down",
        sent=RUNS * PER_RUN,
        acknowledged=len(acked),
        found=len(found),
        lost=len(set(acked) - found),
        duplicates=len(records) - len(found),
        spooled_while_down=spooled,
        readyz_while_down=status,
        seconds_down=round(back_at - down_at, 1),
        seconds_to_recover=round(drained_at - back_at, 1),
    )
    assert figures["lost"] == 0
    assert spooled > 0, "the spool took nothing while the brokers refused"
    # Order per key: each run's events in its partition in the order they were sent
    # (first copies; a resend after an unconfirmed direct send may repeat one).
    for key, numbers in by_key.items():
        firsts = list(dict.fromkeys(numbers))
        assert firsts == sorted(firsts) == list(range(PER_RUN)), (key, numbers)
    # The operator is told why: ready (the spool takes events) and what Kafka said.
    assert status == 200, body
    assert "NOT_ENOUGH_REPLICAS" in orjson.dumps(body).decode(), body
    assert "NOT_ENOUGH_REPLICAS" in page
