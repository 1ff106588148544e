"""Drive a proxy from many concurrent clients and compare what it acknowledged with
what landed, by runId. The comparison is the invariant every fault test checks:
every acknowledged event is found (0 lost), and duplicates are counted."""

from __future__ import annotations

import asyncio
import gzip
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiohttp import ClientError, ClientSession, ClientTimeout, TCPConnector

from tests.support.kafka_reader import Record, read_all_produced_so_far, read_through_markers
from tests.support.sample_events import run_event

__all__ = [
    "BalancedLoadResult",
    "LoadResult",
    "archive_run_ids",
    "compare",
    "kafka_run_ids",
    "landed_before_a_marker",
    "post_events",
    "post_runs_balanced",
]


@dataclass
class LoadResult:
    """What the clients saw: which runIds got a 2xx, every status, the slowest answer."""

    sent: int = 0
    # Requests on the wire now: sent and not yet answered.
    in_flight: int = 0
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
    into: LoadResult | None = None,
    on_answer: Callable[[LoadResult], bool] | None = None,
    identify: Callable[[dict[str, Any]], str] = lambda event: event["run"]["runId"],
) -> LoadResult:
    """POST each event once from ``concurrency`` clients; a connection error or timeout
    is recorded as a status string, never raised. ``pause_seconds`` spaces each client's
    requests, to stretch a load over a fault; ``into`` is filled as answers come, for a
    test that acts on the load's progress. ``on_answer`` is called after each answer is
    recorded, on the clients' own loop, so a test acts at an exact point of the load (a
    kill while requests are in flight, whatever the machine's speed); once it returns
    True no client starts another request (``sent`` then counts those that were).
    ``acknowledged`` holds ``identify(event)`` of each 2xx: the runId unless told."""
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for event in events:
        queue.put_nowait(event)
    result = into if into is not None else LoadResult()
    result.sent = queue.qsize()
    stopped = False

    async def client(session: ClientSession) -> None:
        nonlocal stopped
        while not queue.empty() and not stopped:
            event = queue.get_nowait()
            started = time.monotonic()
            status: int | str
            result.in_flight += 1
            try:
                async with session.post(url + path, data=orjson.dumps(event)) as resp:
                    await resp.read()
                    status = resp.status
            except (ClientError, TimeoutError) as exc:
                status = type(exc).__name__
            finally:
                result.in_flight -= 1
            finished = time.monotonic()
            result.slowest_seconds = max(result.slowest_seconds, finished - started)
            result.statuses[status] += 1
            result.answers.append((finished, status))
            if isinstance(status, int) and 200 <= status < 300:
                result.acknowledged.append(identify(event))
            if on_answer is not None and not stopped and on_answer(result):
                stopped = True
            if pause_seconds:
                await asyncio.sleep(pause_seconds)

    connector = TCPConnector(limit=concurrency)
    async with ClientSession(
        connector=connector, timeout=ClientTimeout(total=request_timeout)
    ) as session:
        await asyncio.gather(*(client(session) for _ in range(concurrency)))
    result.sent -= queue.qsize()  # never started: the load was stopped
    return result


@dataclass
class BalancedLoadResult(LoadResult):
    """A :class:`LoadResult` of :func:`post_runs_balanced`: ``acknowledged`` holds event
    identities; ``acked_by`` says which proxy answered each 2xx and whether from its spool
    (the ``X-Lineage-Spooled`` header); ``failovers`` counts requests sent again to
    another proxy; ``gave_up`` the events no proxy acknowledged in time."""

    acked_by: dict[str, tuple[str, bool]] = field(default_factory=dict)
    failovers: int = 0
    gave_up: list[str] = field(default_factory=list)


async def post_runs_balanced(
    urls: Sequence[str],
    next_run: Callable[[], list[dict[str, Any]] | None],
    identify: Callable[[dict[str, Any]], str],
    *,
    concurrency: int = 32,
    request_timeout: float = 15.0,
    give_up_seconds: float = 120.0,
    into: BalancedLoadResult | None = None,
) -> BalancedLoadResult:
    """``concurrency`` clients behind a load balancer over the proxies at ``urls``. Each
    client posts one pipeline run's events in order, the next only after a 2xx for the
    last (as one job's OpenLineage client does), and takes the next run from
    ``next_run()`` until it returns None. A client keeps its proxy (one keep-alive
    connection, as a layer-4 balancer pins it); a request that fails — connection
    refused or reset, timeout, 5xx — is sent again to the next proxy, which the client
    then keeps, as a balancer retries on another upstream and marks the failed one
    down. A 4xx is final (not retried). An event not acknowledged within
    ``give_up_seconds`` ends its run (later events of the run would overtake it)."""
    result = into if into is not None else BalancedLoadResult()

    async def post(session: ClientSession, url: str, event: dict[str, Any]) -> int | str:
        try:
            async with session.post(url + "/api/v1/lineage", data=orjson.dumps(event)) as resp:
                await resp.read()
                if 200 <= resp.status < 300:
                    spooled = resp.headers.get("X-Lineage-Spooled") == "true"
                    result.acked_by[identify(event)] = (url, spooled)
                return resp.status
        except (ClientError, TimeoutError) as exc:
            return type(exc).__name__

    async def deliver(session: ClientSession, proxy: int, event: dict[str, Any]) -> int | None:
        """Post ``event`` until a proxy takes it: the proxy that did (the client keeps
        it), or None when none did."""
        result.sent += 1
        first = time.monotonic()
        while True:
            status = await post(session, urls[proxy], event)
            finished = time.monotonic()
            result.statuses[status] += 1
            result.answers.append((finished, status))
            result.slowest_seconds = max(result.slowest_seconds, finished - first)
            if isinstance(status, int) and 200 <= status < 300:
                result.acknowledged.append(identify(event))
                return proxy
            if (isinstance(status, int) and status < 500) or finished - first > give_up_seconds:
                result.gave_up.append(identify(event))
                return None
            result.failovers += 1
            proxy = (proxy + 1) % len(urls)
            await asyncio.sleep(0.05)  # a balancer's retry backoff, not a wait for a state

    async def client(number: int) -> None:
        proxy = number % len(urls)
        connector = TCPConnector(limit=1)
        async with ClientSession(
            connector=connector, timeout=ClientTimeout(total=request_timeout)
        ) as session:
            while (run := next_run()) is not None:
                for event in run:
                    took = await deliver(session, proxy, event)
                    if took is None:
                        break
                    proxy = took

    await asyncio.gather(*(client(number) for number in range(concurrency)))
    return result


def kafka_run_ids(bootstrap: str, topic: str, *, timeout: float = 60.0) -> Counter[str]:
    """runIds of every RunEvent produced to ``topic`` so far, counted (a count above 1 is
    a duplicate); read up to a marker in every partition, so nothing is missed and no
    fixed wait is involved."""
    records = read_all_produced_so_far(bootstrap, topic, timeout=timeout)
    return Counter(_run_id(r) for r in records)


async def landed_before_a_marker(
    url: str,
    bootstrap: str,
    topic: str,
    *,
    namespace: str,
    name: str,
    headers: dict[str, str] | None = None,
) -> list[Record]:
    """Records the proxy at ``url`` put in ``topic`` before a marker RunEvent posted now
    for job ``namespace``/``name``: the marker has the key a refused event of that job
    would have had, so it lands in the same partition, behind anything the refused event
    produced. "Nothing landed" is then ``== []`` after reading past the spot, which a dead
    reader cannot pass (it times out on the marker)."""
    marker = run_event(namespace=namespace, name=name)
    async with (
        ClientSession() as session,
        session.post(url + "/api/v1/lineage", data=orjson.dumps(marker), headers=headers) as resp,
    ):
        assert resp.status == 200, f"marker refused: {resp.status} {await resp.text()}"
    marker_id = marker["run"]["runId"].encode()
    return await asyncio.to_thread(read_through_markers, bootstrap, topic, marker_id)


def archive_run_ids(directory: Path) -> Counter[str]:
    """runIds of every RunEvent in the archive files under ``directory``, counted —
    finished and in-progress files alike (an in-progress file holds fsynced, acknowledged
    events until it is renamed). A last line without its newline is a write a crash cut
    short, never acknowledged, and is left out."""
    found: Counter[str] = Counter()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if ".gz" in path.suffixes:
            data = gzip.decompress(data)
        for line in data.split(b"\n")[:-1]:
            found[str(orjson.loads(line)["run"]["runId"])] += 1
    return found


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
