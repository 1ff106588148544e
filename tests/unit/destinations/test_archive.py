"""The archive writer on real files: layout, fsync before ack, group commit, rotation,
gzip, crash leftovers, and real faults (a full tmpfs, or a file size limit)."""

from __future__ import annotations

import asyncio
import fcntl
import gzip
import os
import resource
import subprocess
import sys
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.destinations import DeliveryError
from proxy.destinations.archive.destination import (
    ArchiveDestination,
    ArchiveWriter,
    escape_partition_value,
    event_partition,
    finished_files,
)
from proxy.destinations.archive.layout import MAX_PARTITION_VALUE_BYTES, event_date
from tests.support.paths import REPO
from tests.support.sample_events import dataset_event, run_event
from tests.support.small_disk import fill, limit_file_size, small_tmpfs
from tests.support.waiting import wait_for


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
    await wait_for(lambda: bool(list(finished_files(tmp_path))), what="the file's final name")
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


def run_ids_in(directory: Path) -> list[str]:
    return sorted(e["run"]["runId"] for f in finished_files(directory) for e in lines_of(f))


def assert_only_whole_lines(directory: Path) -> None:
    """Every archive file, finished or in progress, holds whole JSON lines only."""
    for path in directory.rglob("*.jsonl*"):
        data = path.read_bytes()
        assert not data or data.endswith(b"\n"), f"torn last line in {path}"
        for line in data.splitlines():
            orjson.loads(line)


LONG_NAMESPACES = ["n" * 300, "😀" * 62, "/" * 90, "é" * 101, "a" * 246]


@pytest.mark.parametrize(
    "namespace", LONG_NAMESPACES, ids=["ascii", "emoji", "slashes", "é", "246"]
)
async def test_long_namespaces_get_a_directory_that_fits_and_keep_their_events(
    tmp_path: Path, namespace: str
):
    directory = f"namespace={escape_partition_value(namespace)}"
    assert len(directory.encode()) <= 255
    writer = ArchiveWriter(tmp_path)
    await writer.start()
    event = at(run_event(namespace=namespace), "2026-11-23T10:00:00Z")
    await writer.write(event, payload(event))
    await writer.close()
    (final,) = finished_files(tmp_path)
    assert final.parent.name == directory
    assert lines_of(final)[0]["job"]["namespace"] == namespace  # the full one, from the event


def test_shortened_partition_values_never_collide_with_whole_ones():
    whole = "n" * MAX_PARTITION_VALUE_BYTES
    assert escape_partition_value(whole) == whole
    longer = escape_partition_value(whole + "n")
    assert len(longer.encode()) > MAX_PARTITION_VALUE_BYTES  # so no whole value equals it
    assert longer.startswith("n" * 190) and "~" in longer[-17:]
    # Differences past the cut still give different directories.
    assert escape_partition_value("x" * 300 + "a") != escape_partition_value("x" * 300 + "b")
    # A cut never splits a %XX escape or a character.
    assert escape_partition_value("/" * 90).split("~")[0] == "%2F" * 66
    assert escape_partition_value("😀" * 62).split("~")[0] == "😀" * 50


@pytest.mark.parametrize(
    ("event_time", "day"),
    [
        ("0001-01-01T00:00:00+01:00", "0001-01-01"),  # UTC instant before year 1: clamped
        ("9999-12-31T23:59:59-01:00", "9999-12-31"),  # after year 9999: clamped
        ("0001-01-01T00:30:00-01:00", "0001-01-01"),
        ("9999-12-31T23:00:00+05:00", "9999-12-31"),
        ("2026-11-23T23:30:00-02:00", "2026-11-24"),
        ("2026-11-23T10:00:00z", "2026-11-23"),
    ],
)
def test_event_dates_at_the_calendars_edges_are_clamped_never_raised(event_time: str, day: str):
    assert event_date({"eventTime": event_time}) == day


async def test_one_partition_failing_in_a_group_commit_fails_only_its_own_events(tmp_path: Path):
    # A file where a partition directory should be: that partition cannot be created.
    blocked = tmp_path / "dt=2026-11-23" / "namespace=blocked"
    blocked.parent.mkdir()
    blocked.write_bytes(b"")
    writer = ArchiveWriter(tmp_path)
    await writer.start()
    good = [at(run_event(namespace=f"team-{i}"), "2026-11-23T10:00:00Z") for i in range(5)]
    bad = at(run_event(namespace="blocked"), "2026-11-23T10:00:00Z")
    outcomes = await asyncio.gather(  # one group commit: all queued before the worker runs
        *(writer.write(e, payload(e)) for e in [*good[:2], bad, *good[2:]]),
        return_exceptions=True,
    )
    assert [type(o).__name__ for o in outcomes] == ["NoneType"] * 2 + ["DeliveryError"] + [
        "NoneType"
    ] * 3
    await writer.close()
    assert run_ids_in(tmp_path) == sorted(e["run"]["runId"] for e in good)


async def test_a_partition_that_keeps_failing_is_logged_once_not_once_per_commit(
    tmp_path: Path, caplog
):
    blocked = tmp_path / "dt=2026-11-23" / "namespace=blocked"
    blocked.parent.mkdir()
    blocked.write_bytes(b"")
    writer = ArchiveWriter(tmp_path)
    await writer.start()
    for _ in range(30):  # thirty commits, each failing the same way
        bad = at(run_event(namespace="blocked"), "2026-11-23T10:00:00Z")
        with pytest.raises(DeliveryError):
            await writer.write(bad, payload(bad))
    await writer.close()
    said = [r for r in caplog.records if "write failed" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert "namespace=blocked" in said[0].getMessage()


async def _full_disk_then_freed(
    directory: Path, make_full: Callable[[], None], make_free: Callable[[], None]
) -> None:
    """The scenario of a disk filling up under a writer with an open file, then freed."""
    destination = ArchiveDestination("archive", ArchiveWriter(directory))
    await destination.start()
    before = [at(run_event(), "2026-11-23T10:00:00Z") for _ in range(5)]
    for event in before:
        await destination.deliver(event, payload(event))
    make_full()
    during = [at(run_event(), "2026-11-23T10:00:00Z") for _ in range(40)]
    outcomes = await asyncio.wait_for(  # a hang fails here
        asyncio.gather(
            *(destination.deliver(e, payload(e)) for e in during), return_exceptions=True
        ),
        30,
    )
    refused = [o for o in outcomes if o is not None]
    assert refused, "the full disk refused nothing"
    assert all(isinstance(o, DeliveryError) and o.retriable for o in refused), refused
    assert not await destination.ready()
    assert_only_whole_lines(directory)
    # Still refused while full, answered each time (the writer is alive).
    with pytest.raises(DeliveryError):
        big = at(run_event(), "2026-11-23T10:00:00Z")
        big["job"]["facets"] = {"pad": {"_producer": "p", "_schemaURL": "s", "x": "x" * 100_000}}
        await asyncio.wait_for(destination.deliver(big, payload(big)), 30)
    make_free()
    assert await destination.ready()
    after = [at(run_event(), "2026-11-23T10:00:00Z") for _ in range(5)]
    for event in after:
        await asyncio.wait_for(destination.deliver(event, payload(event)), 30)
    await destination.close()
    assert_only_whole_lines(directory)
    stored = [e for e, o in zip(during, outcomes, strict=True) if o is None]
    assert run_ids_in(directory) == sorted(e["run"]["runId"] for e in before + stored + after)


def _largest_file(directory: Path) -> int:
    return max(p.stat().st_size for p in directory.rglob("*.jsonl*"))


def file_size_limit_scenario(directory: Path) -> None:
    """The full-disk scenario under RLIMIT_FSIZE (run in a subprocess: it binds every file)."""
    asyncio.run(
        _full_disk_then_freed(
            directory,
            lambda: limit_file_size(_largest_file(directory) + 100),
            lambda: limit_file_size(resource.RLIM_INFINITY),
        )
    )


async def test_full_disk_refuses_promptly_keeps_whole_lines_and_recovers_once_freed(
    tmp_path: Path,
):
    with small_tmpfs("1m") as disk:
        if disk is not None:
            fillers: list[Path] = []
            await _full_disk_then_freed(
                disk / "archive", lambda: fillers.append(fill(disk)), lambda: fillers.pop().unlink()
            )
            return
    # Mounting is not permitted here: the same scenario with a real file size limit (EFBIG).
    code = (
        "import sys; from pathlib import Path; from tests.unit.destinations.test_archive "
        "import file_size_limit_scenario as run; run(Path(sys.argv[1]))"
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


async def test_a_stalled_disk_answers_within_the_write_timeout(tmp_path: Path, monkeypatch):
    # A disk that stops answering cannot be made for real here; block fsync instead.
    release = threading.Event()
    real_fsync = os.fsync

    def stuck_fsync(fd: int) -> None:
        release.wait(30)
        real_fsync(fd)

    destination = ArchiveDestination("archive", ArchiveWriter(tmp_path, write_timeout_seconds=0.3))
    await destination.start()
    monkeypatch.setattr(os, "fsync", stuck_fsync)
    try:
        event = at(run_event(), "2026-11-23T10:00:00Z")
        with pytest.raises(DeliveryError, match="not written within"):
            await destination.deliver(event, payload(event))
        await asyncio.sleep(0.4)
        with pytest.raises(DeliveryError, match="stalled"):  # at once, not queued behind it
            await destination.deliver(event, payload(event))
        assert not await destination.ready()
    finally:
        release.set()
    monkeypatch.undo()
    await wait_for(destination.ready, what="the archive ready once the write is released")
    later = at(run_event(), "2026-11-23T10:00:00Z")
    await destination.deliver(later, payload(later))
    await destination.close()
    assert later["run"]["runId"] in run_ids_in(tmp_path)


async def test_crash_leftovers_lose_their_torn_last_line_before_they_are_finished(tmp_path: Path):
    folder = tmp_path / "dt=2026-11-23" / "namespace=x"
    folder.mkdir(parents=True)
    (folder / "_events-plain.jsonl.inprogress").write_bytes(b'{"a":1}\n{"b":2}\n{"c":')
    (folder / "_events-torn.jsonl.inprogress").write_bytes(b'{"c":')
    whole = zlib.compressobj(6, zlib.DEFLATED, 31)
    member = whole.compress(b'{"d":4}\n') + whole.flush()
    (folder / "_events-zipped.jsonl.gz.inprogress").write_bytes(member + member[:-5])
    writer = ArchiveWriter(tmp_path)
    await writer.start()
    await writer.close()
    assert (folder / "events-plain.jsonl").read_bytes() == b'{"a":1}\n{"b":2}\n'
    assert (folder / "events-zipped.jsonl.gz").read_bytes() == member
    assert not (folder / "events-torn.jsonl").exists()  # nothing whole: removed
    assert sorted(p.name for p in folder.iterdir()) == [
        "events-plain.jsonl",
        "events-zipped.jsonl.gz",
    ]
