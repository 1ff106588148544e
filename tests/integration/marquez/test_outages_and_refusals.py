"""Faults with the real Marquez: the server stopped mid-stream and started again, events
it refuses, and events in an order it might not expect.

Events are produced straight into Kafka (what the proxy would have put there) and
delivered by the consumer daemon with the default retry and circuit-breaker settings, the
behaviour a user gets. The order Marquez stored them in is read from its own table
(``lineage_events.created_at``, the insert's transaction time), which its API does not show.

Figures (tests/support/figures.py): sent, stored (distinct events in Marquez), lost,
duplicates (extra copies stored), dead_lettered (messages in ``<topic>.dlq``) and
seconds_to_recover (from Marquez healthy again to its first stored event of the stream).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from consumers.config import ConsumerConfig
from tests.support.consumers import (
    TEST_GROUP,
    create_topic,
    dead_letter_count,
    metric,
    produce,
    running,
)
from tests.support.figures import report
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.marquez import MarquezServer
from tests.support.marquez_state import api_get, post_events, post_raw
from tests.support.sample_events import facet, run_event
from tests.support.waiting import eventually, wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.marquez,
    pytest.mark.slow,
    pytest.mark.xdist_group("marquez"),
    # A cold Marquez JVM (migrations included) takes ~2 min to start on a loaded 2-core box.
    pytest.mark.timeout(900),
]

BASE_TIME = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def _stream(namespace: str, runs: int, per_run: int) -> list[tuple[str, dict[str, Any]]]:
    """(key, event): ``runs`` runs of START, RUNNING…, COMPLETE, interleaved across runs,
    each carrying its place in its run in a custom ``seq`` run facet."""
    run_ids = [str(uuid.uuid4()) for _ in range(runs)]
    out = []
    for n in range(per_run):
        kind = "START" if n == 0 else "COMPLETE" if n == per_run - 1 else "RUNNING"
        for r, run_id in enumerate(run_ids):
            event = run_event(namespace=namespace, name=f"job{r}", event_type=kind, run_id=run_id)
            event["eventTime"] = (BASE_TIME + timedelta(seconds=n)).isoformat()
            event["run"]["facets"]["seq"] = {**facet("Seq"), "n": n}
            out.append((f"run:{event['run']['runId']}", event))  # as the proxy keys it
    return out


def _encoded(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str | None, bytes]]:
    return [(key, orjson.dumps(event)) for key, event in events]


def _arrived(server: MarquezServer, namespace: str) -> list[tuple[str, int]]:
    """(job, seq) of ``namespace``'s events in the order Marquez stored them."""
    out = []
    for row in server.arrival_order():
        event = orjson.loads(row)
        if event.get("job", {}).get("namespace") == namespace:
            out.append((event["job"]["name"], event["run"]["facets"]["seq"]["n"]))
    return out


def _config(url: str, topic: str) -> ConsumerConfig:
    return ConsumerConfig.model_validate(
        {
            "target": {"kind": "marquez", "url": url},
            "topics": [topic],
            "group_id": f"group.{topic}",
            "group": TEST_GROUP,
        }
    )


def _assert_in_order(arrived: list[tuple[str, int]]) -> None:
    by_run: dict[str, list[int]] = defaultdict(list)
    for job, n in arrived:
        by_run[job].append(n)
    for job, numbers in by_run.items():
        assert numbers == sorted(numbers), f"{job} stored out of order: {numbers}"


@pytest.mark.parametrize("outage_seconds", [5, 60])
async def test_marquez_stopped_mid_stream_loses_nothing_and_keeps_order(
    marquez, broker, topic, outage_seconds
):
    server = marquez["proxied"]
    namespace = f"outage-{uuid.uuid4().hex[:8]}"
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 3)
    events = _stream(namespace, runs=12, per_run=10)
    half = len(events) // 2
    async with running(bootstrap, _config(server.url, topic)) as daemon:
        await asyncio.to_thread(produce, bootstrap, topic, _encoded(events[:half]))
        await wait_for(
            lambda: asyncio.to_thread(lambda: len(_arrived(server, namespace)) > 0),
            within=60,
            what="the first events in Marquez",
        )
        await asyncio.to_thread(server.stop)
        stopped_at = time.monotonic()
        try:
            await asyncio.to_thread(produce, bootstrap, topic, _encoded(events[half:]))
            await wait_for(lambda: metric(daemon, "retried") > 0, within=60, what="a retry")
            # The outage itself is the fault under test: Marquez stays down this long.
            await asyncio.sleep(max(0.0, stopped_at + outage_seconds - time.monotonic()))
        finally:
            await asyncio.to_thread(server.start)
        back_at = time.monotonic()
        before = len(_arrived(server, namespace))
        await wait_for(
            lambda: asyncio.to_thread(lambda: len(_arrived(server, namespace)) > before),
            within=120,
            what="Marquez to store again",
        )
        recovered = time.monotonic() - back_at
        await eventually(
            lambda: asyncio.to_thread(lambda: len(set(_arrived(server, namespace))) >= len(events)),
            within=180,
        )
    arrived = _arrived(server, namespace)
    stored = Counter(arrived)
    figures = report(
        f"marquez (real): stopped {outage_seconds} s mid-stream, then started again",
        sent=len(events),
        stored=len(stored),
        lost=len(events) - len(stored),
        duplicates=sum(n - 1 for n in stored.values()),
        dead_lettered=await asyncio.to_thread(dead_letter_count, bootstrap, topic),
        seconds_down=round(back_at - stopped_at, 1),
        seconds_to_recover=round(recovered, 2),
    )
    assert figures["lost"] == 0 and figures["dead_lettered"] == 0
    _assert_in_order(arrived)


async def test_a_complete_before_its_start_leaves_the_run_running_in_marquez(marquez):
    """Marquez accepts a run's COMPLETE before its START (201 for both) and keeps the state
    of the event it applied last: the run then shows RUNNING for ever. So per-run order
    is not checked by Marquez, and the consumer must keep it."""
    server = marquez["direct"]
    namespace = f"order-{uuid.uuid4().hex[:8]}"
    run_id = str(uuid.uuid4())
    start = run_event(namespace=namespace, name="late_start", run_id=run_id)
    start["eventTime"] = BASE_TIME.isoformat()
    complete = {
        **start,
        "eventType": "COMPLETE",
        "eventTime": (BASE_TIME + timedelta(minutes=2)).isoformat(),
    }
    assert await asyncio.to_thread(post_events, server.url, [complete, start]) == [201, 201]
    path = f"namespaces/{namespace}/jobs/late_start/runs"
    [run] = (await asyncio.to_thread(api_get, server.url, path))["runs"]
    report(
        "marquez (real): COMPLETE before START",
        state=run["state"],
        durationMs=run.get("durationMs"),
    )
    assert (run["state"], run["durationMs"]) == ("RUNNING", 120_000)


# What the real Marquez 0.50.0 refuses, and how (found by asking it; see the docs page):
# a null required field → 422; an eventTime that is no date-time, or a body that is no
# JSON → HTTP 500 with {"code":400}. It ACCEPTS (201) a runId that is not a UUID, an
# unknown eventType and an eventTime without offset.
REFUSALS = {
    "job.name missing": 422,
    "eventTime missing": 422,
    "eventTime date only": 500,
    "not JSON": 500,
}


def _refused_events(namespace: str) -> dict[str, bytes]:
    def event(**change: Any) -> dict[str, Any]:
        document = run_event(namespace=namespace, name="refused")
        document.update(change)
        return document

    no_name = event()
    no_name["job"] = {"namespace": namespace}
    return {
        "job.name missing": orjson.dumps(no_name),
        "eventTime missing": orjson.dumps({k: v for k, v in event().items() if k != "eventTime"}),
        "eventTime date only": orjson.dumps(event(eventTime="2026-11-23")),
        "not JSON": b'{"eventType": "START", ',
    }


async def test_what_marquez_refuses_is_dead_lettered_exactly_once(marquez, broker, topic):
    server = marquez["proxied"]
    namespace = f"refused-{uuid.uuid4().hex[:8]}"
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 1)
    refused = _refused_events(namespace)
    # What the real Marquez answers each of them, asked directly (the double's behaviour
    # is checked against these answers in test_double_matches_real_marquez below).
    answers = {
        why: (await asyncio.to_thread(post_raw, marquez["direct"].url, body))[0]
        for why, body in refused.items()
    }
    good = _stream(namespace, runs=2, per_run=3)
    messages = _encoded(good[:3]) + [(f"run:{namespace}/refused", b) for b in refused.values()]
    messages += _encoded(good[3:])
    async with running(bootstrap, _config(server.url, topic)) as daemon:
        await asyncio.to_thread(produce, bootstrap, topic, messages)

        def dead_lettered() -> float:
            # The daemon's counters: the DLQ holds a non-JSON message dead_letter_count
            # cannot read.
            return sum(metric(daemon, "dead_lettered", why=w) for w in ("poison", "refused"))

        await wait_for(
            lambda: asyncio.to_thread(
                lambda: (
                    len(_arrived(server, namespace)) >= len(good)
                    and dead_lettered() >= len(refused)
                )
            ),
            within=120,
            what="every good event stored and every refused one dead-lettered",
        )
    dead = await asyncio.to_thread(read_all_produced_so_far, bootstrap, f"{topic}.dlq")
    figures = report(
        "marquez (real): refused events",
        answers=answers,
        sent=len(messages),
        stored=len(_arrived(server, namespace)),
        dead_lettered=len(dead),
    )
    assert answers == REFUSALS
    assert Counter(r.value for r in dead) == Counter(refused.values())
    assert figures["stored"] == len(good)
