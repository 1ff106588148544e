"""The consumer's offset bookkeeping as a state machine, searched by hypothesis: fetches,
deliveries finishing in any order, commits, rebalances (in-flight deliveries finish or
are cancelled, then the last commit) and crashes (no last commit), on a partition whose
offsets have gaps (compaction, transaction markers).

The promise checked: the group's committed offset never passes an event that was not
delivered, and no offset the commit's metadata says was finished past it (the next owner
skips those) was left undelivered — after any crash the next owner delivers every
undelivered event — and once everything is delivered the commit reaches the end of the
partition. The daemon uses one :class:`~consumers.offsets.OffsetTracker` per assigned
partition exactly as modelled here: ``add`` at fetch (skipping what it says the last owner
finished), ``done`` at delivery, ``commit_point`` then ``committed_at`` at each commit and
at revoke, a new tracker from the committed metadata at assignment (consumers/daemon.py,
consumers/kafka_source.py).
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from consumers.offsets import OffsetTracker, decode_done


class OffsetMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.log: list[int] = []
        self.tracker = OffsetTracker()
        self.next_fetch = 0  # index into self.log
        self.in_flight: list[int] = []
        self.delivered: set[int] = set()
        self.group_committed: int | None = None  # what the broker keeps for the group
        self.group_metadata = ""  # with it: the offsets finished past it
        self.commits: list[int] = []
        self.skipped = 0

    @initialize(
        start=st.integers(0, 10**12),
        gaps=st.lists(st.integers(1, 3), min_size=1, max_size=60),
    )
    def partition(self, start: int, gaps: list[int]) -> None:
        offset = start
        for gap in gaps:
            self.log.append(offset)
            offset += gap

    @precondition(lambda self: self.next_fetch < len(self.log))
    @rule(count=st.integers(1, 10))
    def fetch(self, count: int) -> None:
        for offset in self.log[self.next_fetch : self.next_fetch + count]:
            if self.tracker.add(offset):  # the last owner finished it: skipped, done
                assert offset in self.delivered, f"{offset} skipped but never delivered"
                self.skipped += 1
                self.tracker.done(offset)
            else:
                self.in_flight.append(offset)
        self.next_fetch = min(len(self.log), self.next_fetch + count)

    @precondition(lambda self: self.in_flight)
    @rule(data=st.data())
    def deliver_one(self, data: st.DataObject) -> None:
        """Lanes of different keys finish in any order."""
        offset = data.draw(st.sampled_from(self.in_flight))
        self.in_flight.remove(offset)
        self.delivered.add(offset)
        self.tracker.done(offset)

    @rule()
    def commit(self) -> None:
        point = self.tracker.commit_point()
        if point is not None:
            self.group_committed, self.group_metadata, _ = point
            self.tracker.committed_at(point)
            self.commits.append(point[0])

    @rule(finishing=st.sets(st.integers(0, 60)))
    def rebalance(self, finishing: set[int]) -> None:
        """Revoke: lanes already delivering finish (some), queued ones are dropped
        undelivered, the commit is made, and the partition is assigned afresh."""
        for index, offset in enumerate(list(self.in_flight)):
            if index in finishing:
                self.in_flight.remove(offset)
                self.delivered.add(offset)
                self.tracker.done(offset)
        self.commit()
        self._reassign()

    @rule()
    def crash(self) -> None:
        """SIGKILL: no last commit; the next owner starts from the group's offset."""
        self._reassign()

    def _reassign(self) -> None:
        resume = self.group_committed
        self.tracker = OffsetTracker(
            () if resume is None else decode_done(resume, self.group_metadata)
        )
        self.in_flight.clear()
        self.next_fetch = (
            0
            if resume is None
            else next((i for i, o in enumerate(self.log) if o >= resume), len(self.log))
        )

    @invariant()
    def nothing_undelivered_lies_behind_the_committed_offset(self) -> None:
        if self.group_committed is not None:
            behind = [o for o in self.log if o < self.group_committed]
            undelivered = [o for o in behind if o not in self.delivered]
            assert undelivered == [], f"committed {self.group_committed} past {undelivered}"
            said_done = decode_done(self.group_committed, self.group_metadata)
            assert said_done <= self.delivered, f"metadata names {said_done - self.delivered}"

    @invariant()
    def the_committed_offset_never_goes_back(self) -> None:
        assert self.commits == sorted(self.commits)

    @invariant()
    def a_restart_from_the_position_reads_the_first_unfinished_event_first(self) -> None:
        unfinished = [o for o in self.log[: self.next_fetch] if o in self.in_flight]
        if unfinished:
            # A restart from ``position`` reads the first unfinished event first (offsets
            # between them are gaps of the partition).
            position, first = self.tracker.position, min(unfinished)
            assert position is not None and position <= first
            assert not [o for o in self.log if position <= o < first]

    def teardown(self) -> None:
        if not self.log:
            return
        # Everything fetched and delivered at last: the commit reaches the end.
        self.fetch(len(self.log))
        for offset in list(self.in_flight):
            self.in_flight.remove(offset)
            self.delivered.add(offset)
            self.tracker.done(offset)
        self.commit()
        self.nothing_undelivered_lies_behind_the_committed_offset()
        assert self.group_committed == self.log[-1] + 1


OffsetMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)
test_the_commit_never_passes_an_undelivered_event_across_rebalances_and_crashes = (
    OffsetMachine.TestCase
)
