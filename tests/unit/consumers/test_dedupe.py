"""The dedupe cache: identity, LRU bound, and a journal that survives the process."""

from consumers.dedupe import DedupeCache, event_identity
from tests.support.sample_events import run_event


def test_identity_is_run_type_time_and_job():
    event = run_event(event_type="START")
    same = {**event, "producer": "https://other"}
    later = {**event, "eventType": "COMPLETE"}
    assert event_identity(event) == event_identity(same)
    assert event_identity(event) != event_identity(later)


async def test_cache_is_bounded_least_recently_seen_first():
    cache = DedupeCache(max_entries=2)
    for identity in ("a", "b"):
        await cache.add(identity)
    assert cache.seen("a")  # "a" is now the most recent
    await cache.add("c")
    assert len(cache) == 2 and cache.seen("a") and cache.seen("c") and not cache.seen("b")


async def test_journal_is_reloaded_by_the_next_process_and_compacted(tmp_path):
    journal = tmp_path / "state" / "dedupe.journal"
    first = DedupeCache(max_entries=3, journal=journal)
    await first.open()
    for identity in ("a", "b", "c", "d", "e", "f", "g"):
        await first.add(identity)
    # Crash: no close. A torn last line must not break the next start.
    with journal.open("ab") as f:
        f.write(b'["torn')
    second = DedupeCache(max_entries=3, journal=journal)
    await second.open()
    try:
        assert [second.seen(i) for i in "abcdefg"] == [False] * 4 + [True] * 3
        assert len(journal.read_bytes().splitlines()) == 3  # compacted at start
    finally:
        await second.close()
