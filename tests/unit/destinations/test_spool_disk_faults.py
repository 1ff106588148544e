"""The spool on a disk that fills up, stalls or restarts mid-drain (issue 25).

A real small tmpfs (mounted as root, see tests/support/small_disk.py) makes the kernel
refuse writes with ENOSPC; nothing fakes the error. A stalled disk cannot be made here
without a device mapper (none in these containers), so the stall test blocks ``fsync``
of the spool's own files on the worker thread, the way the archive's stall test does.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import Counter
from pathlib import Path

import pytest

from proxy.destinations.kafka.spool import (
    Spool,
    SpooledRecord,
    SpoolFull,
    SpoolStalled,
    decode_records,
)
from tests.support.small_disk import fill, small_tmpfs
from tests.support.waiting import wait_for


def _on_disk(directory: Path) -> list[SpooledRecord]:
    """Every intact record in the segment files, in order (independent of the spool)."""
    records: list[SpooledRecord] = []
    for path in sorted(directory.glob("segment-*.spool")):
        data = path.read_bytes()
        found, valid = decode_records(data, 0)
        assert valid == len(data), f"{path}: {len(data) - valid} bytes after the last record"
        records += found
    return records


def _segment_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("segment-*.spool"))


async def _append_all(spool: Spool, values: list[bytes]) -> list[bytes | BaseException]:
    """Append concurrently (one group commit takes many), keys k0..k4; per value: the
    value once acknowledged, else why not."""
    outcomes = await asyncio.gather(
        *(spool.append("t", f"k{int(v.split(b'-')[1]) % 5}", [], v) for v in values),
        return_exceptions=True,
    )
    return [v if o is None else o for v, o in zip(values, outcomes, strict=True)]


async def test_a_full_disk_loses_nothing_acknowledged_and_the_counts_match_the_disk():
    with small_tmpfs("256k") as disk:
        if disk is None:
            pytest.skip("mounting a tmpfs is not permitted here (needs root)")
        spool = Spool(disk / "spool", 1 << 30, 1 << 20)
        await spool.open()
        room = disk / "room.bin"
        room.write_bytes(b"\0" * 96 * 1024)
        filler = fill(disk)
        room.unlink()  # 96 KiB left: the spool fills it while acknowledging
        acked: list[bytes] = []
        refused = 0
        counter = 0
        # Group commits of a few KiB: smaller than a buffered writer's buffer, where
        # refused bytes used to stay and come back later.
        for _ in range(40):
            values = [b"event-%d-" % (counter + i) + b"x" * 700 for i in range(6)]
            counter += 6
            for outcome in await _append_all(spool, values):
                if isinstance(outcome, bytes):
                    acked.append(outcome)
                else:
                    assert isinstance(outcome, OSError), outcome
                    refused += 1
            # What the spool counts is what is on disk, after every group commit.
            assert spool.bytes == _segment_bytes(disk / "spool")
        assert refused > 0 and acked, (refused, len(acked))
        refusing_while_full = spool.refusing_reason()
        filler.unlink()
        values = [b"event-%d-" % (counter + i) + b"x" * 700 for i in range(40)]
        after = await _append_all(spool, values)
        assert after == values
        acked += values
        on_disk = _on_disk(disk / "spool")
        assert [r.value for r in on_disk] == acked  # nothing refused came back, in order
        assert spool.bytes == _segment_bytes(disk / "spool")
        assert spool.events == len(acked)
        keys = Counter(r.key for r in on_disk)
        assert all(spool.holds("t", key) for key in keys)
        drained: list[bytes] = []
        while batch := await spool.read(10_000):
            drained += [r.value for r in batch]
            await spool.confirm(batch)
        assert drained == acked
        assert spool.events == 0 and spool.bytes == 0
        assert refusing_while_full is not None  # readiness saw the failing disk
        await spool.close()


async def test_a_failed_write_is_seen_as_refusing_until_a_probe_works():
    with small_tmpfs("256k") as disk:
        if disk is None:
            pytest.skip("mounting a tmpfs is not permitted here (needs root)")
        spool = Spool(disk / "spool", 1 << 30, 1 << 20)
        await spool.open()
        filler = fill(disk)
        with pytest.raises(OSError):
            await spool.append("t", "k", [], b"x" * 8192)
        assert "No space" in (spool.refusing_reason() or "")
        await spool.recheck()
        assert spool.refusing_reason() is not None  # still full
        filler.unlink()
        await spool.recheck()  # freed: seen without waiting for an event
        assert spool.refusing_reason() is None
        assert spool.events == 0 and spool.bytes == 0
        await spool.close()


async def test_the_spool_refuses_before_max_bytes_when_the_next_event_would_not_fit(
    tmp_path: Path,
):
    spool = Spool(tmp_path, max_bytes=1000, segment_bytes=1 << 16)
    await spool.open()
    await spool.append("t", "k", [], b"x" * 600)
    assert spool.refusing_reason() is None
    with pytest.raises(SpoolFull):
        await spool.append("t", "k", [], b"x" * 600)
    # Below max_bytes, but the next such event does not fit: say so before it comes.
    assert spool.bytes < spool.max_bytes
    assert "full" in (spool.refusing_reason() or "")
    [record] = await spool.read(10)
    await spool.confirm([record])
    assert spool.refusing_reason() is None
    await spool.close()


async def test_a_stalled_disk_answers_within_the_write_timeout_and_is_not_refused_for_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    release = threading.Event()
    real_fsync = os.fsync

    def stuck_fsync(fd: int) -> None:
        if "segment-" in os.readlink(f"/proc/self/fd/{fd}"):
            release.wait(30)
        real_fsync(fd)

    spool = Spool(tmp_path, 1 << 20, 1 << 16, write_timeout_seconds=0.3)
    await spool.open()
    await spool.append("t", "k", [], b"before")
    monkeypatch.setattr(os, "fsync", stuck_fsync)
    try:
        with pytest.raises(SpoolStalled, match="not fsynced within"):
            await spool.append("t", "k", [], b"stuck")
        await wait_for(spool.stalled, what="the write to count as stalled")
        with pytest.raises(SpoolStalled, match="stalled"):  # at once, not queued behind it
            await spool.append("t", "k", [], b"refused")
        assert "stalled" in (spool.refusing_reason() or "")
    finally:
        release.set()
    await wait_for(lambda: not spool.stalled(), what="the stalled write to return")
    monkeypatch.undo()
    assert spool.refusing_reason() is None
    await spool.append("t", "k", [], b"after")
    values = [r.value for r in await spool.read(10)]
    # "stuck" was being written when its caller heard 503: it may land (a duplicate
    # once the client resends); "refused" never does.
    assert values in ([b"before", b"stuck", b"after"], [b"before", b"after"])
    assert spool.events == len(values)
    await spool.close()


async def test_a_restart_mid_drain_goes_on_from_the_persisted_cursor(tmp_path: Path):
    spool = Spool(tmp_path, 1 << 20, 1 << 20)
    await spool.open()
    for i in range(10):
        await spool.append("t", f"k{i % 2}", [], b"event-%d" % i)
    await spool.confirm(await spool.read(4))  # Kafka has the first four
    await spool.close()

    again = Spool(tmp_path, 1 << 20, 1 << 20)
    await again.open()
    assert again.events == 6
    rest = await again.read(100)
    assert [r.value for r in rest] == [b"event-%d" % i for i in range(4, 10)]
    await again.confirm(rest)
    await again.append("t", "k0", [], b"later")
    await again.close()

    third = Spool(tmp_path, 1 << 20, 1 << 20)
    await third.open()  # new segments are numbered after the drained ones: kept
    assert [r.value for r in await third.read(100)] == [b"later"]
    await third.close()
