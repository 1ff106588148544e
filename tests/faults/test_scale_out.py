"""Scale-out as platform teams run it, on the 3-broker Apache Kafka cluster: two proxy
instances (separate processes, each with its own spool directory) behind a client-side
load balancer, and two consumer daemons in ONE consumer group delivering to a real HTTP
receiver. Under load from 32 clients, one proxy and one consumer are SIGKILLed together.

What must hold:
- 0 acknowledged events lost: every event a proxy answered 2xx reaches the receiver;
- each run's events reach the receiver in the run's order (the first delivery of each;
  a redelivery after the kill repeats events, it never reorders them);
- the surviving consumer takes every partition (its /healthz lists them all) and delivers
  events of the partitions the killed one held;
- the clients never go without service: every event is acknowledged by one proxy.

Why order holds across two proxies: a client sends a run's next event only after the 2xx
for the last, and a 2xx is either Kafka's acks=all confirmation — the event is in the
partition before the next one is sent, whichever proxy takes it — or an fsynced spool
write, which keeps order per key within that proxy only. A run whose events the killed
proxy spooled and whose later events the survivor took can therefore reach Kafka out of
order (docs/operate/scaling.md says so); such runs are counted in the figures and left out
of the order check, and the killed proxy is started again on its spool volume (as an
orchestrator restarts it) so that its spooled events are delivered too.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import signal
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from aiohttp import ClientSession, web
from confluent_kafka import Consumer, TopicPartition

from tests.support.consumers import (
    FAST_RETRY,
    TEST_GROUP,
    consume_process,
    create_topic,
    dead_letter_count,
    seq,
    status_of,
)
from tests.support.doubles.target_double import TargetDouble
from tests.support.figures import report
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.load import BalancedLoadResult, compare, post_runs_balanced
from tests.support.metrics import sample
from tests.support.ports import free_port
from tests.support.processes import ServeProcess, serve_process, stop_process, wait_until_ready
from tests.support.sample_events import facet, run_event
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

PARTITIONS = 6
PER_RUN = 8
CLIENTS = 32
# The kill comes once this many events are acknowledged and the doomed consumer has
# delivered; the load goes on until this many more are acknowledged after the survivor
# holds every partition (so it has new events of each to deliver).
KILL_AFTER_ACKNOWLEDGED = 400
AFTER_TAKEOVER_ACKNOWLEDGED = 400
# The killed consumer dies with this many deliveries sent and unanswered.
IN_FLIGHT_AT_KILL = 8
ANSWER_JITTER_SECONDS = 0.01


class _Receiver(TargetDouble):
    """The generic HTTP target, told which consumer posts (``?member=`` in its URL), that
    can hold one member's deliveries unanswered, so that member is killed with deliveries
    in flight. Held requests are answered 503 and not stored once :meth:`drop_held` is
    called (after their sender was killed; nobody reads the answer)."""

    def __init__(self) -> None:
        super().__init__()
        self.holding: int | None = None
        self.held = 0
        self._dropped = asyncio.Event()
        self._jitter = random.Random(28)

    def url_for(self, member: int) -> str:
        return f"{self.url}{self.path}?member={member}"

    def drop_held(self) -> None:
        self._dropped.set()

    async def answer(self, request: web.Request, body: bytes) -> web.Response:
        if self.holding is not None and request.query.get("member") == str(self.holding):
            self.held += 1
            await self._dropped.wait()
            return web.Response(status=503)
        # A real target's answer time varies: without that, deliveries of one run sent
        # concurrently (out of the consumer's order) would still land in order.
        await asyncio.sleep(self._jitter.uniform(0, ANSWER_JITTER_SECONDS))
        return await super().answer(request, body)


def _identity(event: dict[str, Any]) -> str:
    job, n = seq(event)
    return f"{job}#{n}"


def _run(number: int) -> list[dict[str, Any]]:
    """One pipeline run: PER_RUN events with one runId and key, numbered in a facet."""
    run_id = str(uuid.uuid4())
    events = []
    for n in range(PER_RUN):
        event_type = "START" if n == 0 else "COMPLETE" if n == PER_RUN - 1 else "RUNNING"
        event = run_event(name=f"job{number}", run_id=run_id, event_type=event_type)
        event["run"]["facets"]["seq"] = {**facet("Seq"), "n": n}
        events.append(event)
    return events


def _group(topic: str) -> str:
    return f"group.{topic}"


def _consumer_config(path: Path, bootstrap: str, topic: str, url: str) -> int:
    """A config file for one member of the group; returns its status port."""
    port = free_port()
    consumer = {
        "target": {"kind": "http", "url": url, "retry": FAST_RETRY},
        "topics": [topic],
        "group_id": _group(topic),
        "group": TEST_GROUP,
        "commit_interval_seconds": 0.2,
        "status_port": port,
    }
    config = {"kafka": {"bootstrap_servers": bootstrap}, "consumers": {"receiver": consumer}}
    path.write_text(yaml.safe_dump(config))
    return port


async def _delivered(port: int) -> float:
    """Events a consumer's target accepted so far, from its /metrics (0 before the first)."""
    _, text = await status_of(port, "/metrics")
    return sample(text, "lineage_consumer_delivered_total") or 0.0


async def _assigned(port: int) -> set[str]:
    """The partitions a consumer holds now, from its /healthz ("topic[3]")."""
    _, body = await status_of(port, "/healthz")
    return set(orjson.loads(body)["assigned"])


def _proxy(bootstrap: str, topic: str, directory: Path) -> tuple[ServeProcess, str]:
    """A proxy instance with its own spool volume and archive (``directory``)."""
    return serve_process(
        bootstrap,
        kafka__topic=topic,
        kafka__spool__directory=str(directory / "spool"),
        routing__archive_root=str(directory / "archive"),
        server__run_consumers="[]",
    )


async def _spool_empty(url: str) -> bool:
    """Whether the proxy at ``url`` holds no event in its spool (its /metrics)."""
    async with ClientSession() as session, session.get(f"{url}/metrics") as resp:
        return not sample(await resp.text(), "lineage_proxy_spool_events")


def _caught_up(bootstrap: str, topic: str) -> bool:
    """Whether the consumer group committed every partition of ``topic`` up to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": _group(topic)})
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        committed = consumer.committed(partitions, timeout=10)
        ends = [consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in partitions]
        # A partition nobody wrote to has nothing to commit (a negative offset).
        return all(max(tp.offset, 0) == end for tp, end in zip(committed, ends, strict=True))
    finally:
        consumer.close()


def _stop(process: ServeProcess | None) -> None:
    if process is not None:
        stop_process(process)


@dataclass
class _Topology:
    """Two proxy instances and two members of one consumer group, all real processes."""

    proxies: list[tuple[ServeProcess, str]]
    consumers: list[ServeProcess]
    status_ports: list[int]
    everything: set[str]  # every partition of the topic, as /healthz names them
    started: list[ServeProcess] = field(default_factory=list)

    def urls(self) -> list[str]:
        return [url for _, url in self.proxies]


@dataclass
class _Moments:
    """What the fault script saw: when, and how much had happened by then."""

    killed_at: float = 0.0
    acknowledged_at_kill: int = 0
    killed_consumer_partitions: set[str] = field(default_factory=set)
    in_flight_at_kill: int = 0  # the killed consumer's deliveries the receiver held
    took_over_at: float = 0.0
    delivered_before_takeover: int = 0


def _start(bootstrap: str, topic: str, receiver: _Receiver, directory: Path) -> _Topology:
    proxies = [_proxy(bootstrap, topic, directory / f"proxy-{i}") for i in range(2)]
    configs = [directory / f"consumer-{i}.yaml" for i in range(2)]
    ports = [
        _consumer_config(config, bootstrap, topic, receiver.url_for(member))
        for member, config in enumerate(configs)
    ]
    consumers = [consume_process(config, "receiver") for config in configs]
    return _Topology(
        proxies,
        consumers,
        ports,
        {f"{topic}[{p}]" for p in range(PARTITIONS)},
        [*(process for process, _ in proxies), *consumers],
    )


async def _ready(topology: _Topology) -> None:
    """Both proxies ready, both consumers holding a share of the partitions."""
    for process, url in topology.proxies:
        await asyncio.to_thread(wait_until_ready, url, process)

    async def group_split() -> bool:
        held = [await _assigned(port) for port in topology.status_ports]
        return all(held) and held[0] | held[1] == topology.everything

    await wait_for(group_split, 90, "both consumers holding partitions", ignoring=OSError)


async def _kill_one_of_each(
    topology: _Topology, load: BalancedLoadResult, receiver: _Receiver, stop: asyncio.Event
) -> _Moments:
    """Under load, SIGKILL proxy 0 and consumer 1 together; wait for consumer 0 to hold
    every partition, let the load go on, then end it (``stop``)."""
    moments = _Moments()
    doomed, survivor = topology.status_ports[1], topology.status_ports[0]
    try:

        async def doomed_consumer_delivering() -> bool:
            return (
                len(load.acknowledged) >= KILL_AFTER_ACKNOWLEDGED and await _delivered(doomed) > 0
            )

        await wait_for(doomed_consumer_delivering, 120, "load and deliveries", ignoring=OSError)
        moments.killed_consumer_partitions = await _assigned(doomed)
        receiver.holding = 1
        await wait_for(lambda: receiver.held >= IN_FLIGHT_AT_KILL, 60, "deliveries in flight")
        victims = (topology.proxies[0][0], topology.consumers[1])
        for process in victims:
            process.send_signal(signal.SIGKILL)
        moments.killed_at = time.monotonic()
        moments.acknowledged_at_kill = len(load.acknowledged)
        moments.in_flight_at_kill = receiver.held
        for process in victims:
            assert await asyncio.to_thread(process.wait, 30) == -signal.SIGKILL
        receiver.drop_held()

        async def survivor_holds_everything() -> bool:
            return await _assigned(survivor) == topology.everything

        await wait_for(
            survivor_holds_everything,
            90,
            "the survivor to take every partition",
            alive=topology.consumers[0],
            ignoring=OSError,
        )
        moments.took_over_at = time.monotonic()
        moments.delivered_before_takeover = len(receiver.events)
        enough = len(load.acknowledged) + AFTER_TAKEOVER_ACKNOWLEDGED
        await wait_for(lambda: len(load.acknowledged) >= enough, 120, "load after the takeover")
    finally:
        stop.set()
    return moments


def _runs_out_of_order(delivered: list[tuple[str, int]], skip: set[str]) -> list[str]:
    """Runs (not in ``skip``) whose first deliveries are not in ascending order."""
    firsts: dict[str, list[int]] = {}
    for job, n in dict.fromkeys(delivered):
        firsts.setdefault(job, []).append(n)
    return [job for job, ns in firsts.items() if job not in skip and ns != sorted(ns)]


async def test_two_proxies_and_two_consumers_one_of_each_sigkilled_under_load(
    broker, topic, tmp_path: Path
):
    bootstrap = broker.bootstrap_servers
    await asyncio.to_thread(create_topic, bootstrap, topic, PARTITIONS)
    stop = asyncio.Event()
    load = BalancedLoadResult()
    numbers = itertools.count()
    async with _Receiver() as receiver:
        topology = _start(bootstrap, topic, receiver, tmp_path)
        try:
            await _ready(topology)
            started = time.monotonic()
            # A task group: the load failing stops the fault script, and the other way round.
            async with asyncio.TaskGroup() as group:
                group.create_task(
                    post_runs_balanced(
                        topology.urls(),
                        lambda: None if stop.is_set() else _run(next(numbers)),
                        _identity,
                        concurrency=CLIENTS,
                        into=load,
                    )
                )
                faults = group.create_task(_kill_one_of_each(topology, load, receiver, stop))
            moments = faults.result()
            load_seconds = time.monotonic() - started
            spooled_by_killed = {
                identity
                for identity, (url, spooled) in load.acked_by.items()
                if spooled and url == topology.proxies[0][1]
            }
            live = [topology.proxies[1]]
            if spooled_by_killed:
                # Its spool volume holds acknowledged events: start it again on the same
                # volume, as an orchestrator would; it forwards them to Kafka at start.
                live.append(_proxy(bootstrap, topic, tmp_path / "proxy-0"))
                topology.started.append(live[-1][0])
                await asyncio.to_thread(wait_until_ready, live[-1][1], live[-1][0])
            for process, url in live:
                await wait_for(partial(_spool_empty, url), 120, "spool drained", alive=process)
            # Done is the group's commits at the end of every partition — never "the
            # receiver has everything", which a consumer that lost events never reaches.
            await wait_for(
                lambda: asyncio.to_thread(_caught_up, bootstrap, topic),
                120,
                "the group to commit every partition to its end",
                alive=topology.consumers[0],
            )
            delivered_all_at = time.monotonic()
            assert await _assigned(topology.status_ports[0]) == topology.everything
        finally:
            receiver.drop_held()  # a failure before the kill leaves none waiting forever
            for process in topology.started:
                await asyncio.to_thread(_stop, process)
        delivered = [seq(e) for e in receiver.events]
        after_takeover = [seq(e) for e in receiver.events[moments.delivered_before_takeover :]]

    records = await asyncio.to_thread(read_all_produced_so_far, bootstrap, topic)
    dead_lettered = await asyncio.to_thread(dead_letter_count, bootstrap, topic)
    # Each job here is one run (one runId, one key): its partition, by job name.
    partition_of = {
        orjson.loads(record.value)["job"]["name"]: record.partition for record in records
    }
    in_kafka = Counter(_identity(orjson.loads(record.value)) for record in records)
    found = Counter(f"{job}#{n}" for job, n in delivered)
    figures = compare(load.acknowledged, found)
    out_of_order = _runs_out_of_order(delivered, {i.split("#")[0] for i in spooled_by_killed})
    taken_over = {f"{topic}[{partition_of[job]}]" for job, _ in after_takeover}
    report(
        "kafka_scale_out_proxy_and_consumer_sigkill",
        partitions=PARTITIONS,
        proxies=2,
        consumers=2,
        clients=CLIENTS,
        sent=load.sent,
        acknowledged=figures["acknowledged"],
        acknowledged_before_kill=moments.acknowledged_at_kill,
        found=figures["found"],
        lost=figures["lost"],
        duplicates=figures["duplicates"],
        delivered=len(delivered),
        kafka_found=len(in_kafka),
        kafka_duplicates=sum(n - 1 for n in in_kafka.values() if n > 1),
        dead_lettered=dead_lettered,
        failovers=load.failovers,
        gave_up=len(load.gave_up),
        statuses=dict(load.statuses),
        spooled_by_killed_proxy=len(spooled_by_killed),
        runs=len({job for job, _ in delivered}),
        runs_out_of_order=len(out_of_order),
        killed_consumer_partitions=sorted(moments.killed_consumer_partitions),
        killed_consumer_deliveries_in_flight=moments.in_flight_at_kill,
        partitions_delivered_after_takeover=len(taken_over),
        seconds_to_recover=round(moments.took_over_at - moments.killed_at, 1),
        seconds_to_deliver_all=round(delivered_all_at - moments.killed_at, 1),
        load_seconds=round(load_seconds, 1),
    )
    assert figures["lost"] == 0, "an acknowledged event never reached the receiver"
    assert not load.gave_up, f"events no proxy acknowledged: {load.gave_up[:5]}"
    assert figures["acknowledged"] == load.sent
    assert load.failovers > 0, "no client was sent to the survivor: the kill came too late"
    assert dead_lettered == 0
    assert not out_of_order, f"runs delivered out of order: {out_of_order}"
    assert moments.killed_consumer_partitions <= taken_over, "the survivor did not take over"
    assert topology.consumers[0].returncode == 0, topology.consumers[0].log()
