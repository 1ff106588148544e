"""The spool's file format and bookkeeping, on real files (no broker)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from proxy.destinations.kafka.spool import Spool, SpoolFull, decode_records, encode_record

HEADERS = [("ol_kind", b"RunEvent"), ("x-bin", b"\xff\x00")]


def _spool(directory: Path, max_bytes: int = 1 << 20, segment_bytes: int = 1 << 16) -> Spool:
    return Spool(directory, max_bytes, segment_bytes)


def _segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("segment-*.spool"))


async def _read_all(spool: Spool) -> list:
    records, batch = [], await spool.read(10_000)
    while batch:
        records += batch
        await spool.confirm(batch)
        batch = await spool.read(10_000)
    return records


def test_a_record_round_trips_with_topic_key_headers_and_value():
    frame = encode_record("t", "run:a/b", HEADERS, b'{"x":1}', 12.5)
    (record,), end = decode_records(frame, 7)
    assert (record.topic, record.key, record.headers, record.value) == (
        "t",
        "run:a/b",
        HEADERS,
        b'{"x":1}',
    )
    assert record.spooled_at == 12.5 and record.segment == 7 and end == len(frame)


def test_a_flipped_byte_ends_the_valid_records():
    first = encode_record("t", "k", [], b"one", 1.0)
    second = bytearray(encode_record("t", "k", [], b"two", 2.0))
    second[-1] ^= 0xFF
    records, end = decode_records(first + bytes(second), 1)
    assert [r.value for r in records] == [b"one"] and end == len(first)


async def test_appended_events_are_read_back_in_order_and_segments_deleted_once_confirmed(
    tmp_path: Path,
):
    spool = _spool(tmp_path, segment_bytes=200)
    await spool.open()
    for i in range(20):
        await spool.append("t", f"k{i % 3}", HEADERS, f"event-{i}".encode())
    assert spool.events == 20 and spool.holds("t", "k1") and not spool.holds("t", "k9")
    assert len(_segments(tmp_path)) > 1
    records = await _read_all(spool)
    assert [r.value for r in records] == [f"event-{i}".encode() for i in range(20)]
    assert spool.events == 0 and spool.bytes == 0 and not spool.holds("t", "k1")
    assert _segments(tmp_path) == []
    await spool.close()


async def test_a_torn_tail_is_cut_and_the_records_before_it_survive_a_restart(tmp_path: Path):
    spool = _spool(tmp_path)
    await spool.open()
    for i in range(5):
        await spool.append("t", "k", HEADERS, f"event-{i}".encode())
    await spool.close()
    (segment,) = _segments(tmp_path)
    whole = segment.stat().st_size
    torn = encode_record("t", "k", HEADERS, b"event-5", 0.0)[:-3]  # crash mid-write
    with segment.open("ab") as handle:
        handle.write(torn)

    again = _spool(tmp_path)
    await again.open()
    assert segment.stat().st_size == whole
    assert again.events == 5 and again.holds("t", "k")
    await again.append("t", "k", HEADERS, b"event-6")
    records = await _read_all(again)
    assert [r.value for r in records] == [f"event-{i}".encode() for i in (0, 1, 2, 3, 4, 6)]
    await again.close()


async def test_a_full_spool_refuses_and_stores_nothing(tmp_path: Path):
    spool = _spool(tmp_path, max_bytes=300)
    await spool.open()
    await spool.append("t", "k", [], b"x" * 100)
    with pytest.raises(SpoolFull):
        await spool.append("t", "k", [], b"x" * 250)
    assert spool.events == 1
    assert [r.value for r in await _read_all(spool)] == [b"x" * 100]
    await spool.close()


async def test_a_second_process_cannot_use_a_locked_spool_directory(tmp_path: Path):
    first = _spool(tmp_path)
    await first.open()
    with pytest.raises(RuntimeError, match="another process"):
        await _spool(tmp_path).open()
    await first.close()


async def test_close_writes_appends_still_queued_and_they_survive_a_restart(tmp_path: Path):
    spool = _spool(tmp_path)
    await spool.open()
    appends = [asyncio.create_task(spool.append("t", "k", [], b"%d" % i)) for i in range(50)]
    await asyncio.sleep(0)
    await asyncio.gather(*appends)
    await spool.close()
    again = _spool(tmp_path)
    await again.open()
    assert [r.value for r in await _read_all(again)] == [b"%d" % i for i in range(50)]
    await again.close()


async def test_events_are_counted_out_only_once_their_cursor_is_on_disk(tmp_path: Path):
    """Whoever sees the spool empty (a stop that follows at once, a test) must find it
    empty on disk too. Found by CI: a drain's count reached 0 while its thread was still
    deleting the segment, the stop came first, and a restart found all 3 events again.
    Seen failing with the count taken before the disk work: 0 while the thread waited."""
    spool = _spool(tmp_path)
    await spool.open()
    for i in range(3):
        await spool.append("t", "run:a/b", HEADERS, f"event-{i}".encode())
    records = await spool.read(10)
    deleting, go_on = threading.Event(), threading.Event()
    delete_drained = spool._delete_drained

    def slow_delete() -> int:
        deleting.set()
        go_on.wait(10)
        return delete_drained()

    spool._delete_drained = slow_delete  # type: ignore[method-assign]
    confirming = asyncio.create_task(spool.confirm(records))
    assert await asyncio.to_thread(deleting.wait, 10)
    assert spool.events == 3 and spool.holds("t", "run:a/b")  # not on disk yet
    go_on.set()
    await confirming
    assert spool.events == 0 and not spool.holds("t", "run:a/b")
    await spool.close()
    again = _spool(tmp_path)
    await again.open()
    assert again.events == 0
    await again.close()
