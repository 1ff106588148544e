"""An archive day sorted by event time through spilled runs: same order as a stable
in-memory sort, every kept event once, plain and gzip files alike."""

from __future__ import annotations

import gzip
import random
from datetime import UTC, datetime, timedelta

import orjson

from consumers.sorted_day import sort_day

START = datetime(2026, 11, 21, tzinfo=UTC)


def _line(number: int, when: datetime) -> bytes:
    return orjson.dumps({"n": number, "eventTime": when.isoformat(), "pad": "x" * 100})


def _read(line: bytes):
    event = orjson.loads(line)
    if event["n"] % 10 == 9:  # what a filter leaves out
        return None
    return datetime.fromisoformat(event["eventTime"]), line


def test_spilled_runs_merge_into_a_stable_event_time_order(tmp_path):
    rng = random.Random(7)
    # Few distinct times, so that many events tie and stability is seen.
    times = [START + timedelta(seconds=rng.randrange(40)) for _ in range(600)]
    lines = [_line(n, when) for n, when in enumerate(times)]
    plain, zipped = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"
    plain.write_bytes(b"\n".join(lines[:300]) + b"\n")
    # Several gzip members, as the archive writes them (one per group commit).
    zipped.write_bytes(b"".join(gzip.compress(line + b"\n") for line in lines[300:]))

    day = sort_day([plain, zipped], _read, run_bytes=2000)  # a run every ~15 events
    try:
        got = [event["n"] for _, event in day.events()]
    finally:
        day.close()

    kept = [n for n in range(600) if n % 10 != 9]
    assert got == sorted(kept, key=lambda n: times[n])  # sorted() is stable too
    assert day.count == len(kept)


def test_a_day_smaller_than_one_run_is_sorted_in_memory(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(_line(0, START + timedelta(hours=1)) + b"\n" + _line(1, START) + b"\n\n")
    day = sort_day([path], lambda line: _read(line) if line.strip() else None)
    assert [event["n"] for _, event in day.events()] == [1, 0]
    assert day._runs == []  # nothing written to disk
    day.close()
