"""Consumer daemons against the real broker and a Marquez double: at least once, in order.

The double is here for what the real Marquez cannot be made to do on demand (go down and
come back in a step, answer slowly); two daemons sharing a group are tested against the
real server in tests/integration/marquez/test_consumers_into_marquez.py."""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from typing import Any

import orjson
import pytest

from proxy.destinations.retry import CircuitState
from tests.support.consumers import (
    assert_in_order_per_run,
    consumer_config,
    create_topic,
    encoded,
    metric,
    produce,
    running,
    seq,
    sequenced_run_events,
)
from tests.support.doubles.marquez_double import MarquezDouble
from tests.support.figures import report
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.sample_events import facet, run_event
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

WHY = ("poison", "refused")


async def test_a_topic_created_after_the_consumer_subscribed_is_consumed_within_seconds(
    broker, topic
):
    """The quick start's order: the in-process consumer subscribes before the proxy has
    created the topic. librdkafka only notices a new topic at its next metadata refresh
    (5 minutes by default); ours is 10 s."""
    events = sequenced_run_events(runs=2, per_run=5)
    async with MarquezDouble() as marquez:
        config = consumer_config({"kind": "marquez", "url": marquez.url}, topic)
        async with running(broker.bootstrap_servers, config, assigned=False):
            await asyncio.sleep(2)  # subscribed to a topic that is not there
            started = asyncio.get_running_loop().time()
            await asyncio.to_thread(create_topic, broker.bootstrap_servers, topic, 1)
            await asyncio.to_thread(produce, broker.bootstrap_servers, topic, encoded(events))
            await wait_for(lambda: len(marquez.events) >= len(events), 60, "the late topic")
            seconds = asyncio.get_running_loop().time() - started
    report(
        "consumer_subscribed_before_its_topic_existed",
        sent=len(events),
        delivered=len(marquez.events),
        seconds_to_deliver=round(seconds, 1),
    )
    assert len(marquez.events) == len(events)


# Tries of every run's head event during the outage: twice the 5 after which a retry
# policy with a bound (the producer-side default) would have given up.
OUTAGE_TRIES = 10
# A breaker that stays closed through the outage: every failed try counts against the
# event, as it would on a flaky target the breaker never trips on. (An open circuit's
# failed probes count against no event: test_consumer_target_outage.py covers it.)
CLOSED_BREAKER = {"threshold": 1_000_000}


async def test_target_failing_for_a_while_gives_up_on_nothing_and_loses_nothing(broker, topic_with):
    """The target answers 503 until the head event of every run was tried OUTAGE_TRIES
    times; then it takes events again. Every event reaches it, in order per run, and the
    DLQ holds nothing — proven by a marker event per run produced behind the others
    (delivered only after everything ahead of it in its lane was delivered or
    dead-lettered) and by reading the DLQ up to markers, never by waiting a while.
    Seen failing with the consumers' retry policy bounded to 5 attempts
    (``ConsumerConfig._retry_until_delivered`` leaving ``max_attempts`` at 5): events
    given up were dead-lettered (17 of the 60 in that run), missing at the target."""
    topic = topic_with(3)
    runs, per_run = 6, 10
    events = sequenced_run_events(runs=runs, per_run=per_run)
    keys = sorted({key for key, _ in events})
    async with MarquezDouble() as marquez:
        # Lanes per run, so that every run's head is tried during the outage (in
        # acknowledgement order the first event of a new namespace goes alone).
        config = consumer_config(
            {"kind": "marquez", "url": marquez.url},
            topic,
            circuit_breaker=CLOSED_BREAKER,
            ordering="run",
        )
        marquez.fail_for(3600)
        async with running(broker.bootstrap_servers, config) as daemon:
            await asyncio.to_thread(produce, broker.bootstrap_servers, topic, encoded(events))
            await wait_for(
                lambda: _fewest_tries(marquez, runs) >= OUTAGE_TRIES,
                what=f"every run's head event tried {OUTAGE_TRIES} times",
            )
            marquez.fail_for(0)  # the target is back
            markers = [(key, _marker(events, key, per_run)) for key in keys]
            await asyncio.to_thread(produce, broker.bootstrap_servers, topic, encoded(markers))
            await wait_for(
                lambda: sum(_is_marker(e) for e in marquez.events) == runs, what="the markers"
            )
            retried = metric(daemon, "retried")
            dead_lettered = sum(metric(daemon, "dead_lettered", why=w) for w in WHY)
    stored = [e for e in marquez.events if not _is_marker(e)]
    dlq_topic = f"{topic}.dlq"
    dlq = await asyncio.to_thread(read_all_produced_so_far, broker.bootstrap_servers, dlq_topic)
    report(
        "consumer_target_failing_gives_up_on_nothing",
        sent=len(events),
        stored=len(stored),
        fewest_tries_of_a_run=_fewest_tries(marquez, runs),
        retried=retried,
        dead_lettered=len(dlq),
    )
    assert sorted(seq(e) for e in stored) == sorted(seq(e) for _, e in events)
    assert_in_order_per_run(marquez.events)
    assert dlq == [] and dead_lettered == 0


def _fewest_tries(marquez: MarquezDouble, runs: int) -> int:
    """How often the least-tried run had an event refused by the outage."""
    tries = Counter(seq(orjson.loads(body))[0] for body in marquez.failed_bodies)
    return min(tries.values()) if len(tries) == runs else 0


def _marker(events: list[tuple[str, dict[str, Any]]], key: str, per_run: int) -> dict[str, Any]:
    """An event of ``key``'s run numbered after its last, marked as the marker."""
    event = copy.deepcopy(next(e for k, e in events if k == key))
    event["run"]["facets"]["seq"]["n"] = per_run
    event["run"]["facets"]["marker"] = facet("Marker")
    return event


def _is_marker(event: dict[str, Any]) -> bool:
    return "marker" in event["run"]["facets"]


async def test_refused_and_poison_messages_go_to_the_dlq_and_later_events_are_delivered(
    broker, topic_with
):
    topic = topic_with(3)
    key = "run:team-a/etl.daily"
    good = [run_event(event_type=t) for t in ("START", "RUNNING", "COMPLETE")]
    bad_value = run_event()
    del bad_value["job"]["name"]  # Marquez: 422
    messages = [
        (key, orjson.dumps(good[0])),
        (key, orjson.dumps(bad_value)),
        (key, b"{not json"),  # poison: never reaches the target
        (key, orjson.dumps(good[1])),
        (key, b'{"eventTime": null, "producer": "x"}'),  # Marquez: 422
        (key, orjson.dumps(good[2])),
    ]
    async with MarquezDouble() as marquez:
        config = consumer_config({"kind": "marquez", "url": marquez.url}, topic)
        async with running(broker.bootstrap_servers, config, "to-marquez") as daemon:
            await asyncio.to_thread(produce, broker.bootstrap_servers, topic, messages)
            await wait_for(lambda: len(marquez.events) >= 3, what="the good events")
            await wait_for(
                lambda: sum(metric(daemon, "dead_lettered", why=w) for w in WHY) == 3,
                what="three dead letters",
            )
            assert metric(daemon, "dead_lettered", why="poison") == 1
            assert metric(daemon, "dead_lettered", why="refused") == 2
    assert marquez.events == good
    dlq_topic = f"{topic}.dlq"
    dlq = await asyncio.to_thread(read_all_produced_so_far, broker.bootstrap_servers, dlq_topic)
    assert len(dlq) == 3
    by_offset = {int(r.headers["dlq_source_offset"]): r for r in dlq}
    assert sorted(by_offset) == [1, 2, 4]
    refused, poison, null_field = by_offset[1], by_offset[2], by_offset[4]
    assert refused.value == orjson.dumps(bad_value) and refused.key == key
    assert refused.headers["dlq_http_status"] == b"422"
    assert b"refused" in refused.headers["dlq_reason"]
    assert b"job.name must not be null" in refused.headers["dlq_response_excerpt"]
    assert refused.headers["dlq_retriable"] == b"false"
    assert poison.headers["dlq_reason"].startswith(b"poison")
    assert "dlq_http_status" not in poison.headers
    assert null_field.headers["dlq_http_status"] == b"422"
    for record in dlq:
        assert record.headers["dlq_consumer"] == b"to-marquez"
        assert record.headers["dlq_source_topic"] == topic.encode()
        partition = int(record.headers["dlq_source_partition"])
        assert 0 <= partition < 3


async def test_member_joining_mid_stream_takes_over_without_loss_or_duplicates(broker, topic_with):
    """Commit on revoke: the first member finishes its in-flight deliveries and commits
    before its partitions move, so the second starts exactly where it stopped."""
    topic = topic_with(4)
    events = sequenced_run_events(runs=12, per_run=100)
    async with MarquezDouble() as marquez:
        marquez.delay_seconds = 0.04  # a busy target: the stream outlasts the join
        config = consumer_config({"kind": "marquez", "url": marquez.url}, topic)
        async with running(broker.bootstrap_servers, config, "a") as first:
            await asyncio.to_thread(produce, broker.bootstrap_servers, topic, encoded(events))
            await wait_for(lambda: len(marquez.events) >= 100, what="a first share")
            async with running(broker.bootstrap_servers, config, "b") as second:
                await wait_for(lambda: len(marquez.events) >= len(events), what="all events")
        by_run = assert_in_order_per_run(marquez.events)
    assert metric(first, "delivered") > 0 and metric(second, "delivered") > 0
    assert len(marquez.events) == len(events)  # none lost, none twice
    assert {job: len(ns) for job, ns in by_run.items()} == {f"job{r}": 100 for r in range(12)}


async def test_rebalance_while_the_target_is_down_hands_waiting_events_over_once(
    broker, topic_with
):
    """Lanes waiting on a down target would wait forever: at revoke they get
    shutdown_timeout_seconds, then are cancelled uncommitted, and whoever owns each
    partition next delivers their events once the target is back — none lost, none
    dead-lettered, none twice (a cancelled lane never delivers behind the new owner)."""
    topic = topic_with(4)
    events = sequenced_run_events(runs=8, per_run=5)
    async with MarquezDouble() as marquez:
        config = consumer_config(
            {"kind": "marquez", "url": marquez.url}, topic, shutdown_timeout_seconds=1
        )
        await marquez.down()
        async with running(broker.bootstrap_servers, config, "a") as first:
            await asyncio.to_thread(produce, broker.bootstrap_servers, topic, encoded(events))
            await wait_for(lambda: first.breaker.state is not CircuitState.CLOSED, what="open")
            async with running(broker.bootstrap_servers, config, "b") as second:
                await marquez.up()
                await wait_for(lambda: len(marquez.events) >= len(events), what="all events")
                # The markers: one more event per run, behind its others in its partition.
                # Once all are delivered, the partitions were handed over and delivered
                # to the end; a late copy from a cancelled lane would be counted below.
                markers = sequenced_run_events(runs=8, per_run=6)[-8:]
                await asyncio.to_thread(produce, broker.bootstrap_servers, topic, encoded(markers))
                await wait_for(
                    lambda: sum(seq(e)[1] == 5 for e in marquez.events) == 8, what="markers"
                )
        by_run = assert_in_order_per_run(marquez.events)
    assert len(marquez.events) == len(events) + len(markers)
    assert {job: len(ns) for job, ns in by_run.items()} == {f"job{r}": 6 for r in range(8)}
    assert all(metric(d, "dead_lettered", why=w) == 0 for d in (first, second) for w in WHY)
