"""The archive writer on real files: layout, fsync before ack, group commit, rotation,
gzip, crash leftovers."""

from __future__ import annotations

import asyncio
import fcntl
import gzip
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.destinations import DeliveryError
from proxy.destinations.archive import (
    ArchiveDestination,
    ArchiveWriter,
    escape_partition_value,
    event_partition,
    finished_files,
)
from tests.sample_events import dataset_event, run_event


def payload(event: dict[str, Any]) -> bytes:
    return orjson.dumps(event)


def lines_of(path: Path) -> list[dict[str, Any]]:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return [orjson.loads(line) for line in data.splitlines()]


def at(event: dict[str, Any], event_time: str) -> dict[str, Any]:
    event["eventTime"] = event_time
    return event


def test_partition_is_the_utc_date_and_the_escaped_job_namespace():
    assert event_partition(at(run_event(namespace="team-a"), "2026-11-23T10:00:00Z")) == (
        "dt=2026-11-23/namespace=team-a"
    )
    # 23:30 at UTC-2 is already the next day in UTC.
    late = at(run_event(namespace="s3://bucket"), "2026-11-23T23:30:00.123-02:00")
    assert event_partition(late) == "dt=2026-11-24/namespace=s3%3A%2F%2Fbucket"
    assert event_partition(at(dataset_event(namespace="file"), "2026-01-02T00:00:00+00:00")) == (
        "dt=2026-01-02/namespace=file"
    )


def test_partition_values_are_escaped_like_hive_and_keep_unicode():
    assert escape_partition_value("équipe données") == "équipe données"
    assert escape_partition_value("a=b/c:d%e#f?g*h\"i'j\\k{l[m]n^o\x01p\x7f") == (
        "a%3Db%2Fc%3Ad%25e%23f%3Fg%2Ah%22i%27j%5Ck%7Bl%5Bm%5Dn%5Eo%01p%7F"
    )
    assert escape_partition_value("") == "__HIVE_DEFAULT_PARTITION__"


def test_event_without_namespace_or_time_still_gets_a_partition():
    partition = event_partition({"eventTime": "not a time"})
    assert partition.startswith("dt=20") and partition.endswith(
        "/namespace=__HIVE_DEFAULT_PARTITION__"
    )


async def test_lines_are_appended_in_progress_then_appear_under_final_names(tmp_path: Path):
    writer = ArchiveWriter(tmp_path)
    await writer.start()
    events = [at(run_event(namespace="team-a"), f"2026-11-23T10:00:0{i}Z") for i in range(3)]
    for event in events:
        await writer.write(event, payload(event))
    folder = tmp_path / "dt=2026-11-23" / "namespace=team-a"
    (in_progress,) = folder.iterdir()
    assert in_progress.name.startswith("_events-") and in_progress.name.endswith(
        ".jsonl.inprogress"
    )
    assert list(finished_files(tmp_path)) == []
    assert lines_of(in_progress) == events  # already on disk before rotation
    await writer.close()
    (final,) = finished_files(tmp_path)
    assert final.parent == folder and final.name.endswith(".jsonl")
    assert not final.name.startswith("_")
    assert lines_of(final) == events
    assert list(folder.iterdir()) == [final]


async def test_each_write_is_fsynced_before_it_returns(tmp_path: Path, monkeypatch):
    synced: list[int] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_size)
        real_fsync(fd)

    writer = ArchiveWriter(tmp_path)
    await writer.start()
    monkeypatch.setattr(os, "fsync", recording_fsync)
    event = at(run_event(), "2026-11-23T10:00:00Z")
    await writer.write(event, payload(event))
    # Some fsync saw the file already holding the whole line.
    assert len(payload(event)) + 1 in synced
    monkeypatch.undo()
    await writer.close()


async def test_concurrent_writes_share_fsyncs(tmp_path: Path, monkeypatch):
    calls = 0
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        nonlocal calls
        calls += 1
        real_fsync(fd)

    writer = ArchiveWriter(tmp_path)
    await writer.start()
    monkeypatch.setattr(os, "fsync", counting_fsync)
    events = [at(run_event(), "2026-11-23T10:00:00Z") for _ in range(200)]
    await asyncio.gather(*(writer.write(e, payload(e)) for e in events))
    monkeypatch.undo()
    # One event per fsync would be 200 (plus directory fsyncs); group commit needs few.
    assert calls <= 20
    await writer.close()
    (final,) = finished_files(tmp_path)
    assert sorted(e["run"]["runId"] for e in lines_of(final)) == sorted(
        e["run"]["runId"] for e in events
    )


async def test_rotation_by_size_keeps_every_line_exactly_once(tmp_path: Path):
    writer = ArchiveWriter(tmp_path, max_file_bytes=2000)
    await writer.start()
    events = [at(run_event(namespace="n"), "2026-11-23T10:00:00Z") for _ in range(20)]
    for event in events:
        await writer.write(event, payload(event))
    await writer.close()
    files = list(finished_files(tmp_path))
    assert len(files) >= 3
    assert all(f.stat().st_size < 2000 + 1000 for f in files)
    read = [line for f in sorted(files) for line in lines_of(f)]
    assert sorted(e["run"]["runId"] for e in read) == sorted(e["run"]["runId"] for e in events)


async def test_rotation_by_age_on_the_next_write(tmp_path: Path):
    now = [0.0]
    writer = ArchiveWriter(tmp_path, max_file_age_seconds=60, clock=lambda: now[0])
    await writer.start()
    first, second = (at(run_event(), "2026-11-23T10:00:00Z") for _ in range(2))
    await writer.write(first, payload(first))
    now[0] = 61
    await writer.write(second, payload(second))
    (done,) = finished_files(tmp_path)
    assert lines_of(done) == [first]
    await writer.close()
    assert len(list(finished_files(tmp_path))) == 2


async def test_idle_files_get_their_final_name_after_max_age(tmp_path: Path):
    writer = ArchiveWriter(tmp_path, max_file_age_seconds=0.05)
    await writer.start()
    event = at(run_event(), "2026-11-23T10:00:00Z")
    await writer.write(event, payload(event))
    for _ in range(200):
        if list(finished_files(tmp_path)):
            break
        await asyncio.sleep(0.02)
    (done,) = finished_files(tmp_path)
    assert lines_of(done) == [event]
    await writer.close()


async def test_gzip_files_are_one_member_per_commit_and_read_whole(tmp_path: Path):
    writer = ArchiveWriter(tmp_path, gzip=True)
    await writer.start()
    events = [at(run_event(), "2026-11-23T10:00:00Z") for _ in range(3)]
    for event in events:  # three separate commits → three gzip members
        await writer.write(event, payload(event))
    await writer.close()
    (final,) = finished_files(tmp_path)
    assert final.name.endswith(".jsonl.gz")
    assert final.read_bytes().count(b"\x1f\x8b\x08") >= 3
    assert lines_of(final) == events


async def test_partitions_beyond_max_open_files_are_finished(tmp_path: Path):
    writer = ArchiveWriter(tmp_path, max_open_files=2)
    await writer.start()
    for namespace in ("a", "b", "c"):
        event = at(run_event(namespace=namespace), "2026-11-23T10:00:00Z")
        await writer.write(event, payload(event))
    assert [f.parent.name for f in finished_files(tmp_path)] == ["namespace=a"]
    await writer.close()
    assert len(list(finished_files(tmp_path))) == 3


async def test_leftover_in_progress_files_are_finalised_unless_someone_holds_them(tmp_path: Path):
    folder = tmp_path / "dt=2026-11-23" / "namespace=x"
    folder.mkdir(parents=True)
    orphan = folder / "_events-crashed.jsonl.inprogress"
    orphan.write_bytes(b'{"a":1}\n')
    empty = folder / "_events-empty.jsonl.inprogress"
    empty.write_bytes(b"")
    held = folder / "_events-live.jsonl.inprogress"
    held.write_bytes(b'{"b":2}\n')
    with held.open("rb") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a live writer elsewhere
        writer = ArchiveWriter(tmp_path)
        await writer.start()
        assert held.exists()
    assert not orphan.exists() and not empty.exists()
    assert (folder / "events-crashed.jsonl").read_bytes() == b'{"a":1}\n'
    await writer.close()


async def test_writing_after_close_is_a_retriable_delivery_error(tmp_path: Path):
    writer = ArchiveWriter(tmp_path)
    await writer.start()
    await writer.close()
    with pytest.raises(DeliveryError) as caught:
        await writer.write(run_event(), b"{}")
    assert caught.value.retriable


async def test_failed_disk_write_fails_the_waiting_deliveries(tmp_path: Path, monkeypatch):
    destination = ArchiveDestination("archive", ArchiveWriter(tmp_path))
    await destination.start()
    assert await destination.ready()

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(DeliveryError) as caught:
        await destination.deliver(run_event(), b"{}")
    assert caught.value.destination == "archive" and caught.value.retriable
    assert "No space left" in caught.value.reason
    monkeypatch.undo()
    event = run_event()
    await destination.deliver(event, payload(event))  # the writer carries on afterwards
    await destination.close()
    # The refused event was cut from its file; only the delivered one is readable.
    assert [line for f in finished_files(tmp_path) for line in lines_of(f)] == [event]


async def test_a_failed_commit_is_cut_from_the_file_before_it_is_finished(
    tmp_path: Path, monkeypatch
):
    writer = ArchiveWriter(tmp_path)
    await writer.start()
    kept, refused = (at(run_event(), "2026-11-23T10:00:00Z") for _ in range(2))
    await writer.write(kept, payload(kept))
    real_fsync = os.fsync
    failures = [OSError(5, "Input/output error")]

    def fsync_failing_once(fd: int) -> None:
        if failures:
            raise failures.pop()
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_failing_once)
    with pytest.raises(DeliveryError, match="Input/output error"):
        await writer.write(refused, payload(refused))
    monkeypatch.undo()
    (finished,) = finished_files(tmp_path)  # finished right after the failure
    assert lines_of(finished) == [kept]
    await writer.close()
