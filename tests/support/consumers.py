"""What consumer-daemon tests share: topics, producing events, running daemons in-process
or as real ``lineage-proxy consume`` processes, reading their status and commits. (The
``topic_with`` fixture is in tests/conftest.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from consumers.config import ConsumerConfig
from consumers.daemon import ConsumerDaemon
from tests.support.load import kafka_run_ids
from tests.support.metrics import sample
from tests.support.paths import REPO
from tests.support.processes import ServeProcess
from tests.support.sample_events import facet, run_event
from tests.support.waiting import wait_for

# Short group timeouts: a join takes ~3 s on the test broker instead of ~23 s.
TEST_GROUP = {"session_timeout_ms": 3000, "heartbeat_interval_ms": 300}
FAST_RETRY = {"initial_backoff_seconds": 0.01, "max_backoff_seconds": 0.05}
FAST_BREAKER = {"threshold": 3, "open_seconds": 0.05, "max_open_seconds": 0.2}


def create_topic(
    bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None
) -> None:
    """Create ``topic`` with the cluster's replication and ``config`` (topic settings)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, -1, config=config or {})])[topic].result(10)


def set_topic_config(bootstrap: str, topic: str, name: str, value: str) -> None:
    """Change one setting of ``topic`` on the cluster (an incremental alter: the others stay)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(10)


def produce(bootstrap: str, topic: str, messages: Sequence[tuple[str | None, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for key, value in messages:
        producer.produce(topic, value=value, key=key)
        producer.poll(0)
    assert producer.flush(10) == 0


def sequenced_run_events(
    runs: int, per_run: int, namespace: str = "team-a"
) -> list[tuple[str, dict[str, Any]]]:
    """(key, event) for ``runs`` pipeline runs of ``per_run`` events each, interleaved;
    each event carries its position in its run in a custom ``seq`` run facet. Run ids are
    fresh per call, so a real target shared by several tests keeps their runs apart."""
    run_ids = [str(uuid.uuid4()) for _ in range(runs)]
    out = []
    for i in range(per_run):
        for r in range(runs):
            event = run_event(namespace=namespace, name=f"job{r}", run_id=run_ids[r])
            event["run"]["facets"]["seq"] = {**facet("Seq"), "n": i}
            out.append((f"run:{event['run']['runId']}", event))  # as the proxy keys it
    return out


def encoded(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str | None, bytes]]:
    return [(key, orjson.dumps(event)) for key, event in events]


def seq(event: dict[str, Any]) -> tuple[str, int]:
    return event["job"]["name"], event["run"]["facets"]["seq"]["n"]


def assert_in_order_per_run(received: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Each run's ``seq`` numbers in arrival order, asserted ascending."""
    by_run: dict[str, list[int]] = defaultdict(list)
    for event in received:
        job, n = seq(event)
        by_run[job].append(n)
    for job, numbers in by_run.items():
        assert numbers == sorted(numbers), f"{job} out of order: {numbers}"
    return by_run


def consumer_config(target: dict[str, Any], topic: str, **fields: Any) -> ConsumerConfig:
    target = {"retry": FAST_RETRY, **target}
    return ConsumerConfig.model_validate(
        {
            "target": target,
            "topics": [topic],
            "group_id": f"group.{topic}",
            "group": TEST_GROUP,
            "circuit_breaker": FAST_BREAKER,
            "commit_interval_seconds": 0.2,
            **fields,
        }
    )


def metric(daemon: ConsumerDaemon, name: str, **labels: str) -> float:
    """A counter of ``daemon`` as its /metrics shows it (0 when never incremented)."""
    value = daemon.metrics.registry.get_sample_value(
        f"lineage_consumer_{name}_total", {"consumer": daemon.name, **labels}
    )
    return value or 0.0


@contextlib.asynccontextmanager
async def running(
    bootstrap: str, config: ConsumerConfig, name: str = "test", *, assigned: bool = True
) -> AsyncIterator[ConsumerDaemon]:
    """A daemon running in this event loop, yielded once it holds partitions (at once
    with ``assigned=False``, for a topic that does not exist yet)."""
    daemon = ConsumerDaemon(name, config, bootstrap_servers=bootstrap, default_topic="unused")
    stop = asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    try:
        if assigned:
            await wait_for(
                lambda: bool(daemon.health()[1]["assigned"]) or task.done(), what="assignment"
            )
        if task.done():
            task.result()
        yield daemon
    finally:
        stop.set()
        await task


def consume_process(config: Path, name: str) -> ServeProcess:
    """``lineage-proxy consume NAME --config CONFIG`` as a real process (stderr in a file,
    never a pipe nobody reads: a daemon logging its retries would block on it)."""
    fd, log_name = tempfile.mkstemp(prefix="lineage-proxy-consume-", suffix=".log")
    try:
        process = ServeProcess(
            [sys.executable, "-m", "proxy", "consume", name, "--config", str(config)],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=fd,
            text=True,
        )
    finally:
        os.close(fd)
    process.log_path = Path(log_name)
    return process


async def status_of(port: int, path: str) -> tuple[int, str]:
    """GET ``path`` of a daemon's status server: (status, body)."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}{path}") as resp,
    ):
        return resp.status, await resp.text()


async def metric_of(port: int, name: str) -> float:
    """A counter from a daemon's /metrics, e.g. ``duplicates_skipped``."""
    _, text = await status_of(port, "/metrics")
    value = sample(text, f"lineage_consumer_{name}_total")
    assert value is not None, f"no {name} metric"
    return value


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    """The group's committed offset per partition (negative: nothing committed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        asked = [TopicPartition(topic, p) for p in range(partitions)]
        return [tp.offset for tp in consumer.committed(asked, timeout=10)]
    finally:
        consumer.close()


def dead_letter_count(bootstrap: str, topic: str) -> int:
    """Messages in ``topic``'s dead-letter topic, read up to a marker (the test broker
    shows a partition's last batch only after the next produce)."""
    return sum(kafka_run_ids(bootstrap, f"{topic}.dlq").values())


async def consume_until(config: Path, name: str, port: int, done: Callable[[], bool]) -> float:
    """Run consumer ``name`` as a process until ``done()``, then SIGTERM it (it must exit
    0); returns its ``duplicates_skipped`` counter."""
    process = consume_process(config, name)
    try:
        await wait_for(
            lambda: done() or process.poll() is not None, within=60, what=f"{name} to finish"
        )
        skipped = await metric_of(port, "duplicates_skipped")
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 30)
    assert process.returncode == 0, process.log()
    return skipped
