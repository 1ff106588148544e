"""Acknowledgement order: the reorder buffer and the conflict gate (consumers/ordered.py)."""

from __future__ import annotations

from typing import Any

import orjson
from confluent_kafka import Message

from consumers.ordered import ConflictGate, Lookahead, ReorderBuffer, entities_of
from proxy.destinations.order_stamp import ORDER_HEADER, next_stamp
from tests.sample_events import run_event

P0, P1 = ("t", 0), ("t", 1)


def _message(partition: tuple[str, int], stamp: int | None, millis: int = 0) -> Message:
    headers: list[tuple[str, str | bytes | None]] | None = (
        [(ORDER_HEADER, str(stamp).encode())] if stamp is not None else None
    )
    return Message(
        topic=partition[0], partition=partition[1], headers=headers, timestamp=(1, millis)
    )


def _drain(buffer: ReorderBuffer, now: float) -> list[Message]:
    out = []
    while (message := buffer.peek(now)) is not None:
        buffer.pop(message)
        out.append(message)
    return out


def test_partitions_merge_by_stamp_once_every_partition_has_a_later_record():
    buffer = ReorderBuffer(window_seconds=10)
    buffer.assign([P0, P1])
    a, c = _message(P0, 1), _message(P0, 3)
    b, d = _message(P1, 2), _message(P1, 4)
    for message, partition in ((a, P0), (c, P0), (b, P1)):
        buffer.add(partition, message, now=0)
    # P1's 2 is known, so 1 goes; then 2 (P0 holds 3, later); then 3 must wait: P1 is
    # empty and could still bring something before it, within the window.
    assert _drain(buffer, now=0) == [a, b]
    assert buffer.wait_seconds(now=1) == 9
    buffer.add(P1, d, now=1)
    assert _drain(buffer, now=1) == [c]  # 4 waits: P0 is empty now
    assert _drain(buffer, now=11) == [d]  # the window passed
    assert len(buffer) == 0 and buffer.wait_seconds(now=11) is None


def test_a_partition_keeps_offset_order_whatever_its_stamps():
    """A spool drained after an outage can put older stamps behind newer ones in one
    partition: that partition's order (a run's order) is never broken for the merge."""
    buffer = ReorderBuffer(window_seconds=0)
    buffer.assign([P0])
    late, early = _message(P0, 9), _message(P0, 1)
    buffer.add(P0, late, now=0)
    buffer.add(P0, early, now=0)
    assert _drain(buffer, now=0) == [late, early]


def test_records_without_a_stamp_use_kafkas_timestamp_and_dropped_partitions_give_theirs_back():
    buffer = ReorderBuffer(window_seconds=5)
    buffer.assign([P0, P1])
    stamped = _message(P0, 2_000_000)  # 2 ms in nanoseconds
    plain = _message(P1, None, millis=1)
    buffer.add(P0, stamped, now=0)
    buffer.add(P1, plain, now=0)
    assert buffer.peek(now=0) is plain
    assert buffer.drop([P1]) == [plain] and len(buffer) == 1
    buffer.add(P1, _message(P1, 1), now=0)  # no longer assigned: ignored
    assert _drain(buffer, now=0) == [stamped]  # P1 is gone: nothing to wait for


def test_stamps_increase_within_a_process():
    stamps = [next_stamp() for _ in range(1000)]
    assert stamps == sorted(set(stamps))


def _reader(dataset: str, **kw: Any) -> dict[str, Any]:
    event = run_event(**kw)
    event["inputs"] = [{"namespace": "db", "name": dataset}]
    return event


def _writer(dataset: str, **kw: Any) -> dict[str, Any]:
    event = run_event(**kw)
    event["outputs"] = [{"namespace": "db", "name": dataset}]
    return event


def test_entities_cover_runs_jobs_parents_datasets_symlinks_and_column_sources():
    parent = ("dag", "d", "0176a8c2-fe01-7439-87e6-56a1a1b4029f")
    event = _writer("out", namespace="team-a", name="j", parent=parent, root=parent)
    event["outputs"][0]["facets"] = {
        "symlinks": {"identifiers": [{"namespace": "hive", "name": "db.out", "type": "TABLE"}]},
        "columnLineage": {
            "fields": {"a": {"inputFields": [{"namespace": "db", "name": "src", "field": "x"}]}}
        },
    }
    assert set(entities_of(event)) == {
        f"run:{event['run']['runId']}",
        f"run:{parent[2]}",
        "ns:team-a",
        "job:team-a/j",
        "ns:dag",
        "job:dag/d",
        "ns:db",
        "dataset:db/out",
        "dataset:db/src",
        "ns:hive",
        "dataset:hive/db.out",
    }


def test_the_gate_holds_what_earlier_events_in_flight_name_and_namespaces_only_until_created():
    gate = ConflictGate()
    writer = gate.names(_writer("orders", name="load"))
    reader = gate.names(_reader("orders", name="report"))
    other = gate.names(_reader("customers", name="other"))
    gate.take(writer)
    assert not gate.free(reader)  # reads what is being written
    assert not gate.free(other)  # namespaces team-a and db are not created yet
    gate.release(writer, delivered=True)
    assert gate.in_flight == 0
    gate.take(gate.now(gate.names(_writer("orders", name="load"))))
    assert gate.free(gate.now(gate.names(_reader("customers", name="other"))))  # nothing shared
    assert not gate.free(gate.now(gate.names(_reader("orders", name="report"))))
    assert gate.names(None) == frozenset() and gate.free(frozenset())


def _event_message(partition: tuple[str, int], stamp: int, event: dict[str, Any]) -> Message:
    return Message(
        topic=partition[0],
        partition=partition[1],
        value=orjson.dumps(event),
        headers=[(ORDER_HEADER, str(stamp).encode())],
    )


def test_an_event_waiting_for_its_target_holds_back_only_what_names_the_same_things():
    """A run whose event is retried (or whose dead letter waits) must not stop other runs;
    its own later events, and readers of what it writes, wait behind it."""
    buffer, gate, ahead = ReorderBuffer(window_seconds=0), ConflictGate(), Lookahead(8)
    buffer.assign([P0])
    first = _writer("orders", name="load")
    same_run = _writer("orders", name="load", run_id=first["run"]["runId"])
    reader = _reader("orders", name="report")
    other = _reader("customers", name="other")
    seed = gate.names(_reader("x", name="seed"))
    gate.take(seed)
    gate.release(seed, delivered=True)  # its namespaces (team-a, db) exist now
    for stamp, event in enumerate([first, same_run, reader, other], start=1):
        buffer.add(P0, _event_message(P0, stamp, event), now=0)
    ahead.fill(buffer, gate, now=0)
    started = ahead.start(gate, slots=16)
    assert [w.event for w in started] == [first, other]  # same_run and reader wait for first
    assert ahead.start(gate, slots=16) == [] and len(ahead) == 2
    gate.release(started[0].names, delivered=True)
    assert [w.event for w in ahead.start(gate, slots=16)] == [same_run]  # then reader
