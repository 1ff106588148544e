"""Ordered delivery (issue 36): a target whose graph follows arrival order gets events in
the order the proxy acknowledged them, across runs and partitions.

Events go through a real proxy (which stamps them) into a real 6-partition topic, and a
consumer daemon delivers them to the Marquez double, which is slow to store a writer's
COMPLETE — as a real Marquez is slower on some writes than others. With lanes per run
(``ordering: run``), the reader's START, on another key, overtook that COMPLETE: Marquez
would link the reader to the dataset version before the write."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession

from tests.support.consumers import consumer_config, create_topic, running
from tests.support.doubles.marquez_double import MarquezDouble
from tests.support.figures import report
from tests.support.sample_events import run_event
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

CHAINS = 8


def _step(role: str, chain: int, run_id: str, event_type: str) -> dict[str, Any]:
    event = run_event(name=f"{role}.{chain}", run_id=run_id, event_type=event_type)
    side = "outputs" if role == "writer" else "inputs"
    event[side] = [{"namespace": "db", "name": f"orders_{chain}"}]
    return event


def _chain(chain: int) -> list[dict[str, Any]]:
    """A writer run, then a reader of what it wrote: four events, each with its own key
    but for the two of each run."""
    writer, reader = str(uuid.uuid4()), str(uuid.uuid4())
    return [
        _step("writer", chain, writer, "START"),
        _step("writer", chain, writer, "COMPLETE"),
        _step("reader", chain, reader, "START"),
        _step("reader", chain, reader, "COMPLETE"),
    ]


def _slow_write(body: bytes) -> float:
    return 0.3 if b'"COMPLETE"' in body and b'"writer.' in body else 0.0


@pytest.mark.parametrize("ordering", [None, "acknowledged"], ids=["marquez-default", "set"])
async def test_a_reader_never_overtakes_the_writer_of_its_input_across_partitions(
    start_proxy, broker, topic, ordering
):
    """Seen failing with ``ordering: run`` (lanes per key): 8 of 8 readers' STARTs stored
    before their writers' COMPLETEs."""
    await asyncio.to_thread(create_topic, broker.bootstrap_servers, topic, 6)
    sent = [event for chain in range(CHAINS) for event in _chain(chain)]
    fields = {} if ordering is None else {"ordering": ordering}
    async with MarquezDouble() as marquez, start_proxy() as url, ClientSession() as session:
        marquez.delay_of = _slow_write
        config = consumer_config({"kind": "marquez", "url": marquez.url}, topic, **fields)
        assert config.delivery_order() == "acknowledged"
        async with running(broker.bootstrap_servers, config):
            started = time.monotonic()
            for event in sent:  # one client: each event after the last was acknowledged
                async with session.post(f"{url}/api/v1/lineage", data=orjson.dumps(event)) as r:
                    assert r.status == 200, await r.text()
            await wait_for(lambda: len(marquez.events) >= len(sent), 60, "every event")
            seconds = time.monotonic() - started
    stored = [(e["job"]["name"], e["eventType"]) for e in marquez.events]
    overtaken = [
        chain
        for chain in range(CHAINS)
        if stored.index((f"reader.{chain}", "START"))
        < stored.index((f"writer.{chain}", "COMPLETE"))
    ]
    report(
        f"ordered_delivery_{ordering or 'default'}",
        sent=len(sent),
        delivered=len(marquez.events),
        readers_before_their_writer=len(overtaken),
        seconds=round(seconds, 2),
    )
    assert len(marquez.events) == len(sent)
    assert overtaken == []
    for chain in range(CHAINS):
        mine = [s for s in stored if s[0].endswith(f".{chain}")]
        assert mine == [(e["job"]["name"], e["eventType"]) for e in _chain_order(sent, chain)]


def _chain_order(sent: list[dict[str, Any]], chain: int) -> list[dict[str, Any]]:
    return [e for e in sent if e["job"]["name"].endswith(f".{chain}")]


async def test_a_backlog_is_merged_in_order_even_with_no_reorder_window(start_proxy, broker, topic):
    """Every event is acknowledged before the consumer starts: six partitions with a
    backlog each, fetched from three brokers at different moments. With no reorder window
    at all, only the partitions' known backlogs (their high watermarks ahead of where
    fetching starts) keep the merge in order. Seen failing with that hold taken out of
    ``ReorderBuffer.peek``: readers stored before the writer of their input."""
    await asyncio.to_thread(create_topic, broker.bootstrap_servers, topic, 6)
    sent = [event for chain in range(CHAINS) for event in _chain(chain)]
    async with MarquezDouble() as marquez:
        async with start_proxy() as url, ClientSession() as session:
            for event in sent:
                async with session.post(f"{url}/api/v1/lineage", data=orjson.dumps(event)) as r:
                    assert r.status == 200, await r.text()
        config = consumer_config(
            {"kind": "marquez", "url": marquez.url}, topic, reorder_window_seconds=0
        )
        async with running(broker.bootstrap_servers, config):
            await wait_for(lambda: len(marquez.events) >= len(sent), 60, "every event")
    stored = [(e["job"]["name"], e["eventType"]) for e in marquez.events]
    # Each chain names its own run, job and dataset: only within a chain is order
    # promised; there it must be exactly the order the proxy acknowledged.
    out_of_order = [
        chain
        for chain in range(CHAINS)
        if [s for s in stored if s[0].endswith(f".{chain}")]
        != [(e["job"]["name"], e["eventType"]) for e in _chain_order(sent, chain)]
    ]
    report(
        "ordered_delivery_backlog_no_window",
        sent=len(sent),
        delivered=len(stored),
        chains_out_of_order=len(out_of_order),
    )
    assert len(stored) == len(sent)
    assert out_of_order == []
