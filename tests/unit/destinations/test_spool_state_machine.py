"""The spool as a state machine, searched by hypothesis: appends (awaited, or in flight at
a crash), crashes at any point (with a torn tail), clean restarts, drains that confirm and
drains cut short by a crash before their confirm.

The promise checked: every append the spool confirmed (what the client's 2xx stands for)
is delivered by the drain at least once, in order per key, byte for byte; without a crash
or restart, exactly once; a record delivered before a crash or restart may come once
more after it (the drain's position within a segment is not kept on disk). Written
against the public API of :class:`~proxy.destinations.kafka.spool.Spool` only.

A crash is what a killed process leaves: the spool's files as they are on disk at that
moment (the page cache survives a process kill; a machine crash is the fsync test's
business, tests/integration/test_fsync_before_2xx.py), copied to a fresh directory —
the dead process's lock goes with it — with, now and then, half a record at the end.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections import Counter, defaultdict
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from proxy.destinations.kafka.spool import Spool, SpooledRecord

T = TypeVar("T")

# Keys are what real events give (run:{namespace}/{name}): long, any Unicode, or none.
KEYS = st.one_of(st.none(), st.text(min_size=0, max_size=120), st.just("run:" + "n" * 200))
TOPICS = st.sampled_from(["openlineage.events", "t" * 120])
HEADERS = st.lists(st.tuples(st.text(max_size=45), st.binary(max_size=20)), max_size=3)


class SpoolMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.root = Path(tempfile.mkdtemp(prefix="spool-machine-"))
        self.generation = 0
        self.serial = 0
        # Confirmed appends in order: (serial, topic, key, headers, value).
        self.acked: list[tuple[int, str, str | None, list[tuple[str, bytes]], bytes]] = []
        self.in_flight: dict[int, tuple[asyncio.Task[None], tuple[object, ...]]] = {}
        self.delivered: list[SpooledRecord] = []
        # Serials delivered by a drain whose confirm a crash prevented: may come twice.
        self.may_repeat: Counter[int] = Counter()
        self.spool: Spool

    @initialize(segment_bytes=st.integers(150, 5000))
    def open_first(self, segment_bytes: int) -> None:
        self.segment_bytes = segment_bytes
        self.spool = self._open(self.root / "g0")

    def _run(self, awaitable: Awaitable[T]) -> T:
        return self.loop.run_until_complete(awaitable)

    def _open(self, directory: Path) -> Spool:
        spool = Spool(directory, max_bytes=10_000_000, segment_bytes=self.segment_bytes)
        self._run(spool.open())
        return spool

    def _value(self, serial: int, body: bytes) -> bytes:
        # The serial first: delivered records are told apart by it.
        return serial.to_bytes(4, "big") + body

    # -- the client's side ----------------------------------------------------------

    @rule(topic=TOPICS, key=KEYS, headers=HEADERS, body=st.binary(max_size=300))
    def append(
        self, topic: str, key: str | None, headers: list[tuple[str, bytes]], body: bytes
    ) -> None:
        self.serial += 1
        value = self._value(self.serial, body)
        self._run(self.spool.append(topic, key, headers, value))
        self.acked.append((self.serial, topic, key, headers, value))

    @rule(topic=TOPICS, key=KEYS, body=st.binary(max_size=300))
    def append_in_flight(self, topic: str, key: str | None, body: bytes) -> None:
        """An append whose answer has not come back yet (a crash may come first)."""
        self.serial += 1
        value = self._value(self.serial, body)
        task = self.loop.create_task(self.spool.append(topic, key, [], value))
        self.in_flight[self.serial] = (task, (topic, key, [], value))

    @rule()
    def answers_come_back(self) -> None:
        for serial, (task, record) in sorted(self.in_flight.items()):
            self._run(task)
            self.acked.append((serial, *record))  # type: ignore[arg-type]
        self.in_flight.clear()
        self.acked.sort(key=lambda a: a[0])

    # -- the drainer's side ----------------------------------------------------------

    @rule(limit=st.integers(1, 20))
    def drain(self, limit: int) -> None:
        records = self._run(self.spool.read(limit))
        self.delivered.extend(records)
        self._run(self.spool.confirm(records))

    @rule(limit=st.integers(1, 20), torn=st.binary(max_size=30))
    def drain_then_crash_before_confirm(self, limit: int, torn: bytes) -> None:
        records = self._run(self.spool.read(limit))
        self.delivered.extend(records)
        self.may_repeat.update(self._serial(r) for r in records)
        self.crash(torn)

    # -- the process ----------------------------------------------------------------

    @rule(torn=st.binary(max_size=30))
    def crash(self, torn: bytes) -> None:
        """SIGKILL: what is on disk now is all the next process finds."""
        self._at_least_once_across_a_start()
        # Answers already given are promises; the rest never reached a client.
        for serial, (task, record) in sorted(self.in_flight.items()):
            if task.done() and task.exception() is None:
                self.acked.append((serial, *record))  # type: ignore[arg-type]
        self.acked.sort(key=lambda a: a[0])
        self.generation += 1
        target = self.root / f"g{self.generation}"
        shutil.copytree(self.spool.directory, target, ignore=shutil.ignore_patterns(".lock"))
        segments = sorted(target.glob("segment-*"))
        if torn and segments:
            with segments[-1].open("ab") as tail:
                tail.write(torn)  # a record the kill cut short
        self._abandon()
        self.spool = self._open(target)

    @rule()
    def restart(self) -> None:
        """A clean stop and start on the same directory."""
        self.answers_come_back()
        self._at_least_once_across_a_start()
        self._run(self.spool.close())
        self.spool = self._open(self.spool.directory)

    def _at_least_once_across_a_start(self) -> None:
        """Where the drain got to is not kept on disk: a segment is deleted once all of it
        is confirmed, so a new process sends the confirmed records of a partly drained
        segment again — at least once, as documented (Kafka consumers skip duplicates with
        the dedupe journal). Each start allows each record delivered so far one more copy."""
        self.may_repeat.update({self._serial(r) for r in self.delivered})

    def _abandon(self) -> None:
        for task, _ in self.in_flight.values():
            task.cancel()
        self.in_flight.clear()
        self._run(self.spool.close())  # the old process's files are no longer looked at

    # -- the promises ----------------------------------------------------------------

    @staticmethod
    def _serial(record: SpooledRecord) -> int:
        return int.from_bytes(record.value[:4], "big")

    @invariant()
    def delivered_records_are_what_was_appended_in_order_per_key(self) -> None:
        appended = {a[0]: a for a in self.acked}
        order: dict[tuple[str, str | None], list[int]] = defaultdict(list)
        for record in self.delivered:
            serial = self._serial(record)
            if serial in appended:
                _, topic, key, headers, value = appended[serial]
                assert (record.topic, record.key, record.headers, record.value) == (
                    topic,
                    key,
                    headers,
                    value,
                )
            if serial not in order[(record.topic, record.key)]:
                order[(record.topic, record.key)].append(serial)
        for spool_key, serials in order.items():
            assert serials == sorted(serials), f"{spool_key!r} out of order: {serials}"

    @invariant()
    def nothing_is_delivered_twice_unless_a_crash_came_before_its_confirm(self) -> None:
        counts = Counter(self._serial(r) for r in self.delivered)
        for serial, count in counts.items():
            assert count <= 1 + self.may_repeat[serial], f"record {serial} delivered {count}x"

    @precondition(lambda self: not self.in_flight)
    @invariant()
    def the_spool_counts_what_it_still_holds(self) -> None:
        assert self.spool.events >= 0 and self.spool.bytes >= 0
        assert (self.spool.events == 0) == (self.spool.bytes == 0)

    def teardown(self) -> None:
        try:
            self.answers_come_back()
            for _ in range(10_000):
                records = self._run(self.spool.read(50))
                if not records:
                    break
                self.delivered.extend(records)
                self._run(self.spool.confirm(records))
            delivered = {self._serial(r) for r in self.delivered}
            lost = [a[0] for a in self.acked if a[0] not in delivered]
            assert lost == [], f"confirmed appends never delivered: {lost}"
            assert self.spool.events == 0
            self.delivered_records_are_what_was_appended_in_order_per_key()
            self.nothing_is_delivered_twice_unless_a_crash_came_before_its_confirm()
        finally:
            self._abandon()
            self.loop.close()
            shutil.rmtree(self.root, ignore_errors=True)


SpoolMachine.TestCase.settings = settings(
    max_examples=15,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_every_confirmed_append_is_drained_in_order_per_key_across_crashes = SpoolMachine.TestCase
