"""An event the target always answers with a 5xx, while it takes the others (issue 36,
item 3): dead-lettered after a bounded number of attempts, and its lane moves on — but a
target that is down (every event fails) still dead-letters nothing.

Figures (tests/support/figures.py): sent, delivered, dead_lettered (messages in
``<topic>.dlq``, read up to a marker), attempts of the poison event, and whether the
lane moved on (the poison run's later events delivered).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from consumers.config import DeadLetterConfig
from proxy.destinations.retry import CircuitState
from tests.support.consumers import (
    FAST_BREAKER,
    assert_in_order_per_run,
    consumer_config,
    create_topic,
    dead_letter_count,
    encoded,
    metric,
    produce,
    running,
    seq,
    sequenced_run_events,
)
from tests.support.doubles.marquez_double import MarquezDouble
from tests.support.figures import report
from tests.support.kafka_reader import Record, read_topic
from tests.support.sample_events import facet
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RUNS, PER_RUN = 4, 10
# What a Dropwizard server (Marquez) answers for an exception in its resource.
ERROR_BODY = b'{"code":500,"message":"There was an error processing your request."}'


def _is_poison(event: Any) -> bool:
    return isinstance(event, dict) and "poison" in event.get("run", {}).get("facets", {})


def _poisoned(runs: int, per_run: int) -> list[tuple[str, dict[str, Any]]]:
    """``sequenced_run_events`` whose first event (run job0's first) is the poison."""
    events = sequenced_run_events(runs=runs, per_run=per_run)
    assert seq(events[0][1]) == ("job0", 0)
    events[0][1]["run"]["facets"]["poison"] = facet("Poison")
    return events


async def _dead_letter_of(bootstrap: str, topic: str) -> tuple[Record, int]:
    """The one dead letter, and how many the DLQ holds (read up to a marker)."""
    [record] = await asyncio.to_thread(read_topic, bootstrap, f"{topic}.dlq", expect=1)
    return record, await asyncio.to_thread(dead_letter_count, bootstrap, topic)


def _check_dead_letter(record: Record, event: dict[str, Any], bound: int) -> None:
    """The dead letter is the event, named with the rule and the target's last answer."""
    assert orjson.loads(record.value) == event
    reason = record.headers["dlq_reason"].decode()
    assert f"{bound} times while it took others" in reason, reason
    assert "HTTP 500" in reason and "There was an error processing" in reason, reason
    assert record.headers["dlq_http_status"] == b"500"
    assert b"There was an error processing" in record.headers["dlq_response_excerpt"]


async def test_event_failing_alone_is_dead_lettered_once_the_health_check_shows_the_target_up(
    broker, topic, caplog
):
    """A quiet stream: the poison event (run job0's first) is the only event, so no other
    delivery shows the target up; its health check (Marquez's namespace list) does, after
    each failure. The event is dead-lettered after exactly the default bound of attempts,
    with the target's last answer, and the circuit never opens; job0's later events, sent
    afterwards, are delivered in order.

    Seen failing on the code before the bound (commit 449e26d): the poison event was
    retried for ever ("timed out after 90 s waiting for ... the poison event
    dead-lettered")."""
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 3)
    events = _poisoned(RUNS, PER_RUN)
    bound = DeadLetterConfig().attempts_while_target_up
    assert bound is not None
    async with MarquezDouble() as marquez:
        marquez.refuse_matching(_is_poison, 500, ERROR_BODY)
        config = consumer_config({"kind": "marquez", "url": marquez.url}, topic)
        async with running(bootstrap, config) as daemon:
            await asyncio.to_thread(produce, bootstrap, topic, encoded(events[:1]))
            await wait_for(
                lambda: metric(daemon, "dead_lettered", why="refused") == 1,
                within=90,
                what="the poison event dead-lettered",
            )
            attempts = len(marquez.refused)
            await asyncio.to_thread(produce, bootstrap, topic, encoded(events[1:]))
            await wait_for(
                lambda: len(marquez.events) == len(events) - 1,
                within=60,
                what="every other event delivered",
            )
        record, dead_lettered = await _dead_letter_of(bootstrap, topic)
    by_run = assert_in_order_per_run(marquez.events)
    figures = report(
        "consumer: one event answered 500 for ever, alone (health check says up)",
        sent=len(events),
        delivered=len(marquez.events),
        dead_lettered=dead_lettered,
        poison_attempts=attempts,
        bound=bound,
        health_checks=marquez.health_checks,
        lane_moved_on=by_run.get("job0") == list(range(1, PER_RUN)),
        retried=metric(daemon, "retried"),
    )
    assert figures["dead_lettered"] == 1 and figures["lane_moved_on"]
    assert figures["poison_attempts"] == bound
    assert figures["delivered"] == len(events) - 1
    # The event's failures never opened the circuit.
    assert not [r for r in caplog.records if r.getMessage().startswith("circuit open")]
    _check_dead_letter(record, events[0][1], bound)


async def test_event_failing_while_others_are_delivered_is_dead_lettered_and_its_lane_moves_on(
    broker, topic
):
    """No health check to ask (it fails alone): the poison event arrives first and fails
    until the circuit opens — nothing tells the target from a down one yet. Then the other
    runs' events trickle in and are delivered; each poison failure after one of them
    counts, the poison event is dead-lettered after the default bound with the target's
    last answer, job0's later events follow in order and the circuit ends closed.

    Seen failing on the code before the bound (commit 449e26d): the poison event was
    retried for ever while the others were delivered ("timed out after 90 s waiting for
    the poison event dead-lettered")."""
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 3)
    events = _poisoned(RUNS, PER_RUN * 10)
    poison_run = [e for e in events if e[0] == events[0][0]]
    others = [e for e in events if e[0] != events[0][0]]
    bound = DeadLetterConfig().attempts_while_target_up
    assert bound is not None
    async with MarquezDouble() as marquez:
        marquez.refuse_matching(_is_poison, 500, ERROR_BODY)
        marquez.health_status = 503
        # Lanes per run: the other runs' events are the evidence here. In acknowledgement
        # order (Marquez's default) they would wait behind the poison event, which is the
        # first to name their namespace (docs/consumers/ordering.md): there the health
        # check is the evidence, as in the test above.
        config = consumer_config({"kind": "marquez", "url": marquez.url}, topic, ordering="run")
        async with running(bootstrap, config) as daemon:
            await asyncio.to_thread(produce, bootstrap, topic, encoded(poison_run[:1]))
            await wait_for(
                lambda: daemon.breaker.state is not CircuitState.CLOSED,
                what="the poison event alone to open the circuit",
            )
            alone = len(marquez.refused)
            sent = 1
            for start in range(0, len(others), RUNS - 1):  # one event per other run
                if metric(daemon, "dead_lettered", why="refused"):
                    break
                await asyncio.to_thread(produce, bootstrap, topic, encoded(others[start:][:3]))
                sent += RUNS - 1
                await asyncio.sleep(0.05)
            await asyncio.to_thread(produce, bootstrap, topic, encoded(poison_run[1:PER_RUN]))
            sent += PER_RUN - 1
            await wait_for(
                lambda: (
                    len(marquez.events) == sent - 1
                    and metric(daemon, "dead_lettered", why="refused") == 1
                ),
                within=90,
                what="every event sent delivered and the poison event dead-lettered",
            )
            circuit = daemon.breaker.state
        record, dead_lettered = await _dead_letter_of(bootstrap, topic)
    by_run = assert_in_order_per_run(marquez.events)
    figures = report(
        "consumer: one event answered 500 for ever, the others taken (no health check)",
        sent=sent,
        delivered=len(marquez.events),
        dead_lettered=dead_lettered,
        poison_attempts=len(marquez.refused),
        poison_attempts_alone=alone,
        bound=bound,
        lane_moved_on=by_run.get("job0") == list(range(1, PER_RUN)),
        circuit_at_end=circuit.value,
    )
    assert figures["dead_lettered"] == 1 and figures["lane_moved_on"]
    assert figures["delivered"] == sent - 1
    # Attempts beyond the bound are those made while nothing told the target from a down one.
    assert bound <= figures["poison_attempts"] - alone
    assert figures["circuit_at_end"] == "closed"
    _check_dead_letter(record, poison_run[0][1], bound)


async def _answers_while_down(daemon: Any, more: int) -> None:
    retried = metric(daemon, "retried")
    await wait_for(
        lambda: metric(daemon, "retried") >= retried + more, within=60, what=f"{more} retries"
    )


async def test_target_down_dead_letters_nothing_even_with_the_smallest_bound(broker, topic):
    """Every event fails — 503 for all, then connection refused — for many attempts each,
    with the smallest bound (2): no failure counts, because the target takes nothing, so
    nothing is dead-lettered; once it is back every event is delivered in order.

    Passes on the code before the bound (which never dead-letters a retriable failure);
    seen failing when the rule was broken on purpose to count every failure
    (``FailingEvent.failed`` always true): each event was dead-lettered after 2 attempts
    ("dead-lettered: the target failed this event 2 times ...; last answer HTTP 503"), so
    the outage's retries stopped ("timed out after 60 s waiting for 40 retries")."""
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 3)
    events = sequenced_run_events(runs=RUNS, per_run=PER_RUN)
    async with MarquezDouble() as marquez:
        config = consumer_config(
            {"kind": "marquez", "url": marquez.url},
            topic,
            dead_letter={"attempts_while_target_up": 2},
            # Open late and probe often: many attempts of many events meet the outage.
            circuit_breaker={**FAST_BREAKER, "threshold": 20},
        )
        async with running(bootstrap, config) as daemon:
            marquez.fail_for(3600, 503)
            await asyncio.to_thread(produce, bootstrap, topic, encoded(events))
            await _answers_while_down(daemon, 40)
            answered_503 = marquez.answers.count(503)
            await marquez.down()
            await _answers_while_down(daemon, 40)
            marquez.fail_for(0)
            await marquez.up()
            await wait_for(
                lambda: len(marquez.events) == len(events), within=60, what="every event stored"
            )
            retried = metric(daemon, "retried")
        dead_lettered = await asyncio.to_thread(dead_letter_count, bootstrap, topic)
    figures: dict[str, Any] = report(
        "consumer: target down (503, then refused), smallest bound",
        sent=len(events),
        delivered=len(marquez.events),
        dead_lettered=dead_lettered,
        answered_503=answered_503,
        failed_attempts=retried,
    )
    assert figures["dead_lettered"] == 0 and figures["delivered"] == len(events)
    assert figures["answered_503"] >= 40
    assert_in_order_per_run(marquez.events)
