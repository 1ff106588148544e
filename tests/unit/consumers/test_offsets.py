"""The commit point only moves past offsets that are all finished."""

from consumers.offsets import OffsetTracker, decode_done, encode_done


def test_commit_point_waits_for_the_lowest_unfinished_offset():
    tracker = OffsetTracker()
    for offset in (10, 11, 12, 13):
        tracker.add(offset)
    assert tracker.position == 10
    first = tracker.commit_point()
    assert first is not None and first[0] == 10  # nothing finished: where to start again
    tracker.committed_at(first)
    assert tracker.commit_point() is None  # nothing new since the last commit
    tracker.done(12)
    tracker.done(11)
    point = tracker.commit_point()
    assert point is not None and point[0] == 10  # 10 still in flight: 11 and 12 go along
    assert decode_done(point[0], point[1]) == {11, 12}
    tracker.committed_at(point)
    tracker.done(10)
    point = tracker.commit_point()
    assert point is not None and point[:2] == (13, "") and tracker.position == 13
    tracker.committed_at(point)
    assert tracker.commit_point() is None
    tracker.done(13)
    point = tracker.commit_point()
    assert point is not None and point[0] == 14


def test_offsets_finished_past_the_commit_point_go_with_it_and_are_skipped_by_the_next_owner():
    """A rebalance or a crash used to re-send everything finished past the lowest pending
    offset (lanes finish out of order); the commit's metadata names them."""
    tracker = OffsetTracker()
    for offset in range(10, 20):
        tracker.add(offset)
    for offset in (11, 12, 13, 15, 19):
        tracker.done(offset)
    point = tracker.commit_point()
    assert point is not None and point[:2] == (10, "lp1:1-3,5,9")
    tracker.committed_at(point)
    assert tracker.commit_point() is None  # nothing new
    tracker.done(17)
    assert tracker.commit_point() is not None  # the metadata changed, the offset did not
    after = OffsetTracker(decode_done(10, point[1]))
    assert [after.add(offset) for offset in range(10, 16)] == [False, True, True, True, False, True]


def test_commit_metadata_stays_under_kafkas_limit_and_ignores_what_it_did_not_write():
    every_other = range(1, 20_000, 2)
    text = encode_done(0, every_other)
    assert len(text) <= 3_500 and decode_done(0, text) <= set(every_other)
    assert decode_done(5, "written by someone else") == set()
    assert decode_done(5, "lp1:x") == set() and encode_done(5, []) == ""
