"""The commit point only moves past offsets that are all finished."""

from consumers.offsets import OffsetTracker


def test_commit_point_waits_for_the_lowest_unfinished_offset():
    tracker = OffsetTracker()
    for offset in (10, 11, 12, 13):
        tracker.add(offset)
    assert tracker.position == 10 and tracker.to_commit() is None
    tracker.done(12)
    tracker.done(11)
    assert tracker.to_commit() is None  # 10 still in flight
    tracker.done(10)
    assert tracker.to_commit() == 13 and tracker.position == 13
    tracker.committed = 13
    assert tracker.to_commit() is None  # nothing new since the last commit
    tracker.done(13)
    assert tracker.to_commit() == 14 and tracker.pending == 0
