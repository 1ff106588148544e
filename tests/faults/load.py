"""Drive a proxy from many concurrent clients and compare what it acknowledged with
what landed, by runId. The comparison is the invariant every fault test checks:
every acknowledged event is found (0 lost), and duplicates are counted."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import ClientError, ClientSession, ClientTimeout, TCPConnector
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.kafka_reader import Record, read_topic

__all__ = ["LoadResult", "compare", "kafka_run_ids", "post_events"]


@dataclass
class LoadResult:
    """What the clients saw: which runIds got a 2xx, every status, the slowest answer."""

    sent: int = 0
    acknowledged: list[str] = field(default_factory=list)
    statuses: Counter[int | str] = field(default_factory=Counter)
    slowest_seconds: float = 0.0
    # (monotonic time, status) of each answer, to find when service came back.
    answers: list[tuple[float, int | str]] = field(default_factory=list)

    def first_success_after(self, moment: float) -> float | None:
        """Monotonic time of the first 2xx answered after ``moment``, if any."""
        times = [t for t, s in self.answers if t >= moment and isinstance(s, int) and s < 300]
        return min(times) if times else None

    def acknowledged_at(self) -> list[tuple[float, str]]:
        """(monotonic answer time, runId) of every 2xx: ``answers`` and ``acknowledged``
        are appended together, in the same order."""
        times = [t for t, s in self.answers if isinstance(s, int) and 200 <= s < 300]
        return list(zip(times, self.acknowledged, strict=True))


async def post_events(
    url: str,
    events: Iterable[dict[str, Any]],
    *,
    concurrency: int = 32,
    request_timeout: float = 15.0,
    path: str = "/api/v1/lineage",
    pause_seconds: float = 0.0,
) -> LoadResult:
    """POST each event once from ``concurrency`` clients; a connection error or timeout
    is recorded as a status string, never raised. ``pause_seconds`` spaces each client's
    requests, to stretch a load over a fault."""
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for event in events:
        queue.put_nowait(event)
    result = LoadResult(sent=queue.qsize())

    async def client(session: ClientSession) -> None:
        while not queue.empty():
            event = queue.get_nowait()
            started = time.monotonic()
            status: int | str
            try:
                async with session.post(url + path, data=orjson.dumps(event)) as resp:
                    await resp.read()
                    status = resp.status
            except (ClientError, TimeoutError) as exc:
                status = type(exc).__name__
            finished = time.monotonic()
            result.slowest_seconds = max(result.slowest_seconds, finished - started)
            result.statuses[status] += 1
            result.answers.append((finished, status))
            if isinstance(status, int) and 200 <= status < 300:
                result.acknowledged.append(event["run"]["runId"])
            if pause_seconds:
                await asyncio.sleep(pause_seconds)

    connector = TCPConnector(limit=concurrency)
    async with ClientSession(
        connector=connector, timeout=ClientTimeout(total=request_timeout)
    ) as session:
        await asyncio.gather(*(client(session) for _ in range(concurrency)))
    return result


def kafka_run_ids(
    bootstrap: str, topic: str, *, expect: int, timeout: float = 60.0
) -> Counter[str]:
    """runIds of every RunEvent in ``topic``, counted (a count above 1 is a duplicate).

    The test broker shows a partition's last produced batch to readers only after the
    next produce, so one marker message goes to every partition first and markers are
    left out of the count."""
    partitions = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    producer = Producer({"bootstrap.servers": bootstrap})
    marker = f"marker-{uuid.uuid4()}".encode()
    count = len(partitions.topics[topic].partitions)
    for partition in range(count):
        producer.produce(topic, marker, partition=partition)
    if producer.flush(10) != 0:
        raise RuntimeError("marker messages not confirmed by the broker")
    records = read_topic(bootstrap, topic, expect=expect + count, timeout=timeout)
    return Counter(_run_id(r) for r in records if r.value != marker)


def _run_id(record: Record) -> str:
    return str(orjson.loads(record.value)["run"]["runId"])


def compare(acknowledged: Iterable[str], found: Counter[str]) -> dict[str, int]:
    """The fault figures: acknowledged, found, lost (acknowledged but not found) and
    duplicates (extra copies of any runId)."""
    acked = set(acknowledged)
    return {
        "acknowledged": len(acked),
        "found": len(found),
        "lost": len(acked - set(found)),
        "duplicates": sum(n - 1 for n in found.values() if n > 1),
    }
