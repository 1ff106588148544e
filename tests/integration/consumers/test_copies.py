"""Copies of a record (issue 36, item 5): after a quorum loss, a spool batch the broker did
not confirm in time was committed once per try, behind newer records of its run:
``i0 i1 i2 i2 i2 i3 i4 i2 i3 i4``. Each copy is the same record — key, value, headers and
the proxy's order stamp — and a consumer delivers it once, whatever the target's order."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from confluent_kafka import Producer

from proxy.destinations.kafka.destination import event_headers
from proxy.kafka.order_stamp import ORDER_HEADER, next_stamp
from proxy.openlineage import event_key
from tests.support.consumers import consumer_config, create_topic, metric, running
from tests.support.doubles.marquez_double import MarquezDouble
from tests.support.figures import report
from tests.support.sample_events import event_identity, one_run
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

# What the topic held after the quorum came back: indexes into the run's events.
COMMITTED = [0, 1, 2, 2, 2, 3, 4, 2, 3, 4]


def _produce_as_committed(bootstrap: str, topic: str, run: list[dict]) -> None:
    records: list[tuple[str | None, bytes, list[tuple[str, str | bytes | None]]]] = [
        (event_key(event), orjson.dumps(event), [*event_headers(event), (ORDER_HEADER, stamp)])
        for event in run
        for stamp in [str(next_stamp()).encode()]
    ]
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for index in COMMITTED:
        key, value, headers = records[index]
        producer.produce(topic, value=value, key=key, headers=headers)
    assert producer.flush(10) == 0


@pytest.mark.parametrize("ordering", ["acknowledged", "run"])
async def test_copies_of_a_record_are_delivered_once_in_either_order(broker, topic, ordering):
    """Seen failing without the copy filter: 10 deliveries, COMPLETE → RUNNING → COMPLETE."""
    run = one_run("etl", ["START", "RUNNING", "RUNNING", "RUNNING", "COMPLETE"])
    await asyncio.to_thread(create_topic, broker.bootstrap_servers, topic, 3)
    async with MarquezDouble() as marquez:
        target = {"kind": "marquez", "url": marquez.url}
        config = consumer_config(target, topic, ordering=ordering)
        async with running(broker.bootstrap_servers, config) as daemon:
            await asyncio.to_thread(_produce_as_committed, broker.bootstrap_servers, topic, run)
            await wait_for(
                lambda: (
                    metric(daemon, "delivered") + metric(daemon, "duplicates_skipped")
                    == len(COMMITTED)
                ),
                what="every record handled",
            )
            skipped = metric(daemon, "duplicates_skipped")
    figures = report(
        f"consumer: spool copies committed after a quorum loss ({ordering})",
        records=len(COMMITTED),
        delivered=len(marquez.events),
        duplicates_skipped=skipped,
    )
    assert [event_identity(e) for e in marquez.events] == [event_identity(e) for e in run]
    assert figures["duplicates_skipped"] == len(COMMITTED) - len(run)
