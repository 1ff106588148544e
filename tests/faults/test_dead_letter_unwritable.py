"""A dead letter the dead-letter topic refuses is never dropped: the consumer keeps
trying to write it, its lane waits (other lanes go on), the group's committed offset
stays at it — across a restart too — and /healthz and a metric say so; once the topic
takes the record, the dead letter lands and the offset moves on.

The fault is real: the dead-letter topic is created with a ``max.message.bytes`` below
the refused event's size, so the brokers answer MESSAGE_TOO_LARGE, and it is healed by
raising the topic's limit on the cluster (an incremental config change), as an operator
would.

Figures (tests/support/figures.py): the failed dead-letter writes counted, the committed
offset while the DLQ refused and after it took the record, events the target stored.
"""

from __future__ import annotations

import asyncio
import base64
import os
from typing import Any

import orjson
import pytest

from tests.support.consumers import (
    committed_offsets,
    consumer_config,
    create_topic,
    metric,
    produce,
    running,
    set_topic_config,
)
from tests.support.doubles.marquez_double import MarquezDouble
from tests.support.figures import report
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.sample_events import facet, run_event
from tests.support.waiting import eventually, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# The dead-letter topic's limit while it refuses: the refused event (16 KB that lz4 cannot
# shrink much) is far above it.
REFUSING_LIMIT = "4096"
TAKING_LIMIT = "1048588"  # Kafka's default
STUCK, FREE = "run:team-a/stuck", "run:team-a/free"


def _events() -> tuple[dict[str, Any], list[dict[str, Any]], list[tuple[str | None, bytes]]]:
    """One partition, in offset order: a good event, the refused one (no job name: the
    Marquez double answers 422; padded past the DLQ's limit), one behind it in its lane
    (same key), and two of another key. Returns (refused, the good ones, messages)."""
    refused = run_event(namespace="team-a", name="stuck")
    del refused["job"]["name"]
    # Random, so that the producer's lz4 cannot squeeze it under the limit.
    padding = base64.b64encode(os.urandom(12_000)).decode()
    refused["run"]["facets"]["padding"] = {**facet("Padding"), "text": padding}
    # The same run: one key, and in acknowledgement order it names what the refused names.
    behind = run_event(namespace="team-a", name="stuck", run_id=refused["run"]["runId"])
    free = [run_event(namespace="team-a", name="free") for _ in range(3)]
    keyed = [(FREE, free[0]), (STUCK, refused), (STUCK, behind), (FREE, free[1]), (FREE, free[2])]
    return refused, [*free, behind], [(k, orjson.dumps(e)) for k, e in keyed]


def _problems(daemon: Any) -> list[str]:
    return list(daemon.health()[1]["problems"])


def _dead_letter_problem(daemon: Any) -> str | None:
    return next((p for p in _problems(daemon) if "dead letter" in p), None)


async def test_a_dead_letter_the_dlq_refuses_holds_its_offset_until_the_dlq_takes_it(
    broker, topic_with, caplog
):
    """Seen failing (1) with the dead letter given up after a failed write
    (``DeadLetterTopic.send`` returning instead of retrying: the event silently lost):
    the stopped daemon had committed offset 5, past the event, and the DLQ stayed empty;
    (2) on the code before this test (it retried, but counted nothing, /healthz was
    silent and every attempt logged a line): no failed write was ever counted; (3) with
    the line logged at every attempt instead of rate-limited: 3 lines instead of 1."""
    bootstrap = broker.bootstrap_servers
    topic = topic_with(1)
    dlq = f"{topic}.dlq"
    create_topic(bootstrap, dlq, 1, {"max.message.bytes": REFUSING_LIMIT})
    refused, good, messages = _events()
    free, behind = good[:3], good[3]
    async with MarquezDouble() as marquez:
        config = consumer_config(
            {"kind": "marquez", "url": marquez.url}, topic, shutdown_timeout_seconds=0.5
        )
        group = f"group.{topic}"  # consumer_config's
        # 1. The DLQ refuses: the other lane goes on, the refused event's lane waits.
        async with running(bootstrap, config, "a") as first:
            await asyncio.to_thread(produce, bootstrap, topic, messages)
            await wait_for(lambda: len(marquez.events) >= 3, what="the other lane's events")
            await wait_for(
                lambda: metric(first, "dead_letter_write_failures") >= 3,
                what="three failed dead-letter writes",
            )
            # Asserted after the offsets, which matter most.
            named = await eventually(lambda: _dead_letter_problem(first) is not None)
            problem = _dead_letter_problem(first)
            waiting = first.metrics.registry.get_sample_value(
                "lineage_consumer_dead_letters_waiting", {"consumer": "a"}
            )
            failures_first = metric(first, "dead_letter_write_failures")
            logged = [r for r in caplog.records if "cannot be written to" in r.getMessage()]
        # The daemon has stopped (its last commit is made): whatever it committed and
        # delivered is final, nothing is still on its way.
        held_at = await asyncio.to_thread(committed_offsets, bootstrap, group, topic, 1)
        assert held_at == [1], "committed past an event neither delivered nor dead-lettered"
        assert marquez.events == free, "delivered past the refused event in its lane"
        assert await asyncio.to_thread(read_all_produced_so_far, bootstrap, dlq) == []
        assert named and problem is not None, "/healthz did not name the unwritable dead letter"
        assert dlq in problem and "too large" in problem.lower(), problem
        assert waiting == 1
        # Said once (rate-limited), naming the event and the broker's answer.
        assert len(logged) == 1, [r.getMessage() for r in logged]
        assert f"{topic}[0]@1" in logged[0].getMessage()

        # 2. A restarted daemon reads it again and waits again; then the DLQ takes it.
        async with running(bootstrap, config, "b") as second:
            await wait_for(
                lambda: metric(second, "dead_letter_write_failures") >= 1,
                what="the restarted daemon to meet the refusing DLQ",
            )
            await asyncio.to_thread(
                set_topic_config, bootstrap, dlq, "max.message.bytes", TAKING_LIMIT
            )
            await wait_for(lambda: behind in marquez.events, what="the event behind it")
            await wait_for(
                lambda: committed_offsets(bootstrap, group, topic, 1) == [5],
                what="the offset to move past the dead letter",
            )
            await wait_for(lambda: _problems(second) == [], what="/healthz to clear")
            assert metric(second, "dead_lettered", why="refused") == 1
    [record] = await asyncio.to_thread(read_all_produced_so_far, bootstrap, dlq)
    assert record.value == orjson.dumps(refused) and record.key == STUCK
    assert record.headers["dlq_source_offset"] == b"1"
    assert record.headers["dlq_http_status"] == b"422"
    report(
        "consumer_dead_letter_topic_refuses",
        dead_letter_write_failures=failures_first + metric(second, "dead_letter_write_failures"),
        committed_while_refused=held_at[0],
        committed_after=5,
        dead_lettered=1,
        stored_at_target=len(marquez.events),
        lost=len([e for e in good if e not in marquez.events]),
    )
