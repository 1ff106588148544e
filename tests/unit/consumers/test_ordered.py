"""Acknowledgement order: the reorder buffer and the conflict gate (consumers/ordered.py)."""

from __future__ import annotations

from typing import Any

import orjson
from confluent_kafka import Message

from consumers.ordered import ConflictGate, Lookahead, ReorderBuffer, entities_of
from proxy.kafka.order_stamp import ORDER_HEADER, next_stamp
from tests.support.sample_events import run_event

P0, P1 = ("t", 0), ("t", 1)


def _message(
    partition: tuple[str, int], stamp: int | None, millis: int = 0, offset: int = 0
) -> Message:
    headers: list[tuple[str, str | bytes | None]] | None = (
        [(ORDER_HEADER, str(stamp).encode())] if stamp is not None else None
    )
    return Message(
        topic=partition[0],
        partition=partition[1],
        offset=offset,
        headers=headers,
        timestamp=(1, millis),
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
    # The window passed; the brokers, asked after 4 came, say P0 holds nothing unread.
    assert _drain(buffer, now=11) == [] and buffer.wants_watermarks
    buffer.watermarks({P0: 1, P1: 1}, asked_at=11)
    assert _drain(buffer, now=11) == [d]
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


def test_a_partition_with_records_not_fetched_yet_holds_the_others_past_the_window():
    """A backlog whose fetch lags (CI under CPU load: one partition's first records came
    later than the window): P1 is known to hold offsets 5..7 unread, so P0's records wait
    for them instead of going when the window passes. Seen failing with the hold removed
    from ``peek``: [a, b] came out at now=1."""
    buffer = ReorderBuffer(window_seconds=0.5, max_hold_seconds=30)
    buffer.assign([P0, P1], {P0: (0, 2), P1: (5, 8)})
    a, b = _message(P0, 10, offset=0), _message(P0, 30, offset=1)
    buffer.add(P0, a, now=0)
    buffer.add(P0, b, now=0)
    assert _drain(buffer, now=1) == []
    assert buffer.wait_seconds(now=1) == 29  # until the hold's bound
    early = _message(P1, 20, offset=5)
    buffer.add(P1, early, now=2)
    buffer.watermarks({P1: 8}, asked_at=2)
    assert _drain(buffer, now=2) == [a, early]  # b (30) waits for P1's 6 and 7 again
    # Offsets 6 and 7 were finished by the partition's last owner: skipped, P1 caught up.
    buffer.skip(P1, 6)
    assert _drain(buffer, now=2) == []
    buffer.skip(P1, 7)
    assert _drain(buffer, now=2) == [b]


def test_a_lagging_partition_holds_the_others_only_so_long_and_only_while_there_is_room():
    buffer = ReorderBuffer(window_seconds=0.5, max_hold_seconds=10, full_records=2)
    buffer.assign([P0, P1], {P0: (0, 3), P1: (0, 4)})
    first = _message(P0, 1, offset=0)
    buffer.add(P0, first, now=0)
    assert _drain(buffer, now=9) == []
    assert _drain(buffer, now=10) == [first]  # the hold's bound passed
    second, third = _message(P0, 2, offset=1), _message(P0, 3, offset=2)
    buffer.add(P0, second, now=10)
    buffer.add(P0, third, now=10)
    # Full (2 records): holding on would wait for a fetch with no room, so the window
    # rules until there is room again.
    assert _drain(buffer, now=11) == [second]
    # A partition no longer assigned holds nothing back.
    buffer.drop([P1])
    assert _drain(buffer, now=11) == [third]


def test_a_high_watermark_learned_later_makes_a_partition_lag():
    buffer = ReorderBuffer(window_seconds=0.5)
    buffer.assign([P0, P1])  # the brokers did not answer at assignment: no positions
    buffer.add(P0, a := _message(P0, 1, offset=0), now=0)
    buffer.watermarks({}, asked_at=0.5)  # nor when asked again
    assert _drain(buffer, now=1) == [a]  # nothing known of P1: the window rules
    buffer.add(P1, x := _message(P1, 5, offset=3), now=1)
    buffer.watermarks({}, asked_at=1.5)
    assert _drain(buffer, now=2) == [x]
    buffer.watermarks({P1: 6}, asked_at=2)  # P1 ends at 6: offsets 4 and 5 unread
    buffer.add(P0, b := _message(P0, 9, offset=1), now=2)
    assert _drain(buffer, now=3) == []
    buffer.skip(P1, 5)
    assert _drain(buffer, now=3) == [b]


def test_a_record_goes_by_the_window_only_once_the_brokers_say_nothing_earlier_is_unread():
    """One client: the writer's COMPLETE acknowledged, then the reader's START; they sit
    in two partitions and the COMPLETE's fetch runs late (seen in CI on a loaded machine:
    a reader's START delivered before its writer's COMPLETE). Asked after the START came,
    the brokers count the COMPLETE in its partition's high watermark, so the START waits
    for it. Seen failing with the ask removed from ``peek``: the START went at now=1."""
    buffer = ReorderBuffer(window_seconds=0.5, max_hold_seconds=30)
    buffer.assign([P0, P1], {P0: (0, 0), P1: (0, 0)})
    start = _message(P0, 20, offset=0)
    buffer.add(P0, start, now=0)
    assert _drain(buffer, now=1) == [] and buffer.wants_watermarks
    assert buffer.wait_seconds(now=1) == 29  # woken by the answer, or at the hold's bound
    buffer.watermarks({P0: 1, P1: 1}, asked_at=1)
    assert not buffer.wants_watermarks
    assert _drain(buffer, now=1.5) == []  # P1 holds offset 0, not fetched yet
    complete = _message(P1, 10, offset=0)
    buffer.add(P1, complete, now=2)
    assert _drain(buffer, now=2) == [complete, start]


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
    assert gate.free(writer) and gate.free(reader)  # nothing held any more
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
