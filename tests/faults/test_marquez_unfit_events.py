"""Events Marquez 0.50 cannot take (issue 36, item 3): a JobEvent (a ``runUuid``
NullPointerException after the raw row is stored) and a NUL character in a string
(PostgreSQL refuses it). Fed directly Marquez answers both with a 500 for ever; the
``marquez`` target knows them and dead-letters them at once with the reason, before
sending — or strips the NULs when ``nul_characters: strip`` — and the run's lane moves on.

Against the Marquez double, which reproduces both 500s (tests/support/doubles/marquez_double.py).
Figures: sent, delivered, dead-lettered, attempts the double saw per unfit event (0:
nothing was sent), and whether the lane moved on.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from proxy.destinations.http.marquez import JOB_EVENTS
from tests.support.consumers import (
    assert_in_order_per_run,
    consumer_config,
    create_topic,
    metric,
    produce,
    running,
    sequenced_run_events,
)
from tests.support.doubles.marquez_double import MarquezDouble
from tests.support.figures import report
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.sample_events import job_event
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PER_RUN = 6
JOB_EVENT_REASON = JOB_EVENTS


def _stream() -> tuple[list[tuple[str, bytes]], dict[str, Any], dict[str, Any]]:
    """One run's events on one key: the first, then a JobEvent and an event with a NUL in
    a facet string (both on the run's key), then the rest of the run."""
    events = sequenced_run_events(runs=1, per_run=PER_RUN)
    key = events[0][0]
    unfit_job = job_event(name="job0")  # as openlineage-python sends one: run facets on data
    unfit_job["outputs"] = [{"namespace": "pg", "name": "t", "facets": {}, "outputFacets": {}}]
    with_nul = orjson.loads(orjson.dumps(events[1][1]))
    with_nul["run"]["facets"]["seq"]["note"] = "before\u0000after"
    with_nul["run"]["facets"]["seq"]["n"] = 100  # apart from the run's sequence
    messages = [(key, orjson.dumps(e)) for _, e in events]
    messages[1:1] = [(key, orjson.dumps(unfit_job)), (key, orjson.dumps(with_nul))]
    return messages, unfit_job, with_nul


async def _consume(topic: str, bootstrap: str, target: dict[str, Any], done: Any) -> Any:
    create_topic(bootstrap, topic, 1)
    messages, unfit_job, with_nul = _stream()
    async with MarquezDouble() as marquez:
        config = consumer_config({"kind": "marquez", "url": marquez.url, **target}, topic)
        async with running(bootstrap, config) as daemon:
            await asyncio.to_thread(produce, bootstrap, topic, messages)
            await wait_for(lambda: done(marquez, daemon), within=60, what="the stream handled")
        # Read up to markers: nothing else was dead-lettered.
        dead_letters = await asyncio.to_thread(read_all_produced_so_far, bootstrap, f"{topic}.dlq")
    return marquez, messages, unfit_job, with_nul, dead_letters


async def test_a_job_event_and_a_nul_are_dead_lettered_at_once_with_the_reason(broker, topic):
    """Default settings: the NUL event is dead-lettered without being sent; the JobEvent
    Marquez fails on is sent exactly once — as a client fed directly would, so Marquez
    keeps what it writes before failing — and its 500 is final: one request answered 500,
    one raw row, no retry. Each dead letter names what Marquez cannot take; the run's
    later events are delivered in order.

    Seen failing on the code before the adapter knew them (commit 0070d37): both were
    sent and answered 500 until the failing-event bound dead-lettered them — 20 requests
    answered 500, 10 raw rows of the JobEvent stored ("assert 20 == 0")."""

    def done(marquez: MarquezDouble, daemon: Any) -> bool:
        refused = metric(daemon, "dead_lettered", why="refused")
        return len(marquez.events) == PER_RUN and refused == 2

    bootstrap = broker.bootstrap_servers
    marquez, messages, _, _, records = await _consume(topic, bootstrap, {}, done)
    reasons = [r.headers["dlq_reason"].decode() for r in records]
    by_run = assert_in_order_per_run(marquez.events)
    figures = report(
        "consumer → marquez: a JobEvent and a NUL (default: dead-lettered)",
        sent=len(messages),
        delivered=len(marquez.events),
        dead_lettered=len(records),
        requests_answered_500=marquez.answers.count(500),
        raw_rows_stored=len(marquez.raw_rows),
        lane_moved_on=by_run["job0"] == list(range(PER_RUN)),
    )
    assert figures["dead_lettered"] == 2 and figures["lane_moved_on"]
    assert figures["requests_answered_500"] == 1 and figures["raw_rows_stored"] == 1
    assert reasons[0].startswith(JOB_EVENT_REASON), reasons[0]
    assert reasons[1].startswith("marquez cannot take NUL characters"), reasons[1]
    assert [r.value for r in records] == [m for _, m in messages[1:3]]  # as they came


async def test_nul_characters_stripped_when_asked(broker, topic):
    """``nul_characters: strip``: the NUL event is delivered with its NULs removed (every
    other byte as sent); the JobEvent is still dead-lettered after its one 500.

    Seen failing on the code before (commit 0070d37): ``nul_characters`` was an unknown
    key of the marquez target (config refused)."""

    def done(marquez: MarquezDouble, daemon: Any) -> bool:
        return (
            len(marquez.events) == PER_RUN + 1
            and metric(daemon, "dead_lettered", why="refused") == 1
        )

    bootstrap = broker.bootstrap_servers
    marquez, messages, _, with_nul, records = await _consume(
        topic, bootstrap, {"nul_characters": "strip"}, done
    )
    stripped = [e for e in marquez.events if e["run"]["facets"]["seq"]["n"] == 100]
    figures = report(
        "consumer → marquez: a JobEvent and a NUL (nul_characters: strip)",
        sent=len(messages),
        delivered=len(marquez.events),
        dead_lettered=len(records),
        requests_answered_500=marquez.answers.count(500),
        lane_moved_on=len(marquez.events) == PER_RUN + 1,
    )
    assert figures["dead_lettered"] == 1 and figures["requests_answered_500"] == 1
    expected = orjson.loads(orjson.dumps(with_nul))
    expected["run"]["facets"]["seq"]["note"] = "beforeafter"
    assert stripped == [expected]
