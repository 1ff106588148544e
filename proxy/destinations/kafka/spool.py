"""A write-ahead spool: Kafka messages kept on local disk while the broker cannot take them.

The Kafka destination appends a message here when the broker does not confirm in time or
is known to be down, and the client gets its 2xx once the record is fsynced; a drainer
(:mod:`proxy.destinations.kafka.spool_drainer`) forwards records to Kafka in order and lets the
spool delete a segment once every record in it is confirmed.

On disk, one directory per proxy process (held with ``flock``), segment files
``segment-000000000001.spool`` in order, each a sequence of records::

    crc32 (4 bytes, big-endian) | meta length (4) | value length (4) | meta | value

``meta`` is JSON ``[topic, key, [[header, value-as-latin-1], ...], spooled_at]``; the CRC
covers both lengths, meta and value. A record whose CRC or length does not check out
(a crash mid-write) ends the segment: it and anything after it are cut off at start,
and every record before it is kept.

Appends are group-committed on a worker thread — everything that arrived while the
previous write+fsync ran goes to disk in the next one — so the event loop never blocks
and throughput is not one fsync per event. Writes are unbuffered ``os.pwrite`` at the
segment's fsynced length: a refused write (disk full, I/O error) is cut back with
``ftruncate`` and leaves nothing behind in memory, so the spool's byte, event and per-key
counts are always those of the records on disk. An append not fsynced within
``write_timeout_seconds`` (a stalled disk) fails, and while a write is stuck new appends
fail at once. See docs/operate/spool.md for the guarantees.

Beside the segments: ``cursor`` (where the drainer got to, so a restart does not resend a
drained segment prefix) and ``dead-letters.spool`` (records Kafka refused for good, in the
segment format, each with a ``spool_refused`` header saying why).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import logging
import os
import struct
import threading
import time
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import orjson

from proxy.destinations.disk_writes import disk_accepts, fsync_directory, write_all_at
from proxy.support.throttled_log import ThrottledLog

__all__ = [
    "DEAD_LETTER_FILE",
    "Spool",
    "SpoolFull",
    "SpoolLocked",
    "SpoolRefused",
    "SpoolStalled",
    "SpooledRecord",
    "decode_records",
    "encode_record",
    "holds_segments",
    "read_dead_letters",
]

log = logging.getLogger(__name__)

_HEAD = struct.Struct(">III")
_SUFFIX = ".spool"
_LOCK_NAME = ".lock"
_CURSOR_NAME = "cursor"
# Records Kafka refused for good (too large, invalid): set aside so the drain goes on.
DEAD_LETTER_FILE = "dead-letters.spool"
# The header a dead letter carries: why Kafka refused it.
REFUSED_HEADER = "spool_refused"
# segment number, offset, crc32 of both.
_CURSOR = struct.Struct(">QQI")
_PROBE_PREFIX = ".probe-"
_PROBE_BYTES = 64 * 1024
# How much of a segment the drainer reads at a time.
_READ_CHUNK = 4 * 1024 * 1024

Headers = list[tuple[str, bytes]]


class SpoolRefused(Exception):
    """The spool did not store the event; trying again later may work."""


class SpoolFull(SpoolRefused):
    """The spool holds ``max_bytes`` already; the event was not stored."""


class SpoolStalled(SpoolRefused):
    """The spool's disk did not fsync within ``write_timeout_seconds``."""


class SpoolLocked(RuntimeError):
    """Another live process holds the spool directory."""


@dataclass(frozen=True, slots=True)
class SpooledRecord:
    """One spooled Kafka message and where it ends in its segment."""

    topic: str
    key: str | None
    headers: Headers
    value: bytes
    spooled_at: float
    segment: int
    end: int


def holds_segments(directory: Path) -> bool:
    """Whether ``directory`` holds spool segments (blocking: call from a thread)."""
    return directory.is_dir() and any(directory.glob(f"segment-*{_SUFFIX}"))


def encode_record(
    topic: str, key: str | None, headers: Headers, value: bytes, spooled_at: float
) -> bytes:
    meta = orjson.dumps([topic, key, [[n, v.decode("latin-1")] for n, v in headers], spooled_at])
    lengths = struct.pack(">II", len(meta), len(value))
    crc = zlib.crc32(value, zlib.crc32(meta, zlib.crc32(lengths)))
    return struct.pack(">I", crc) + lengths + meta + value


def read_dead_letters(path: Path) -> list[SpooledRecord]:
    """The records of a dead-letter file (:data:`DEAD_LETTER_FILE`), oldest first."""
    return decode_records(path.read_bytes(), 0)[0]


def decode_records(data: bytes, segment: int) -> tuple[list[SpooledRecord], int]:
    """The whole, intact records at the start of ``data`` and the offset where they end."""
    records = []
    offset = 0
    while offset + _HEAD.size <= len(data):
        crc, meta_len, value_len = _HEAD.unpack_from(data, offset)
        end = offset + _HEAD.size + meta_len + value_len
        if end > len(data):
            break
        meta = data[offset + _HEAD.size : offset + _HEAD.size + meta_len]
        value = data[offset + _HEAD.size + meta_len : end]
        lengths = data[offset + 4 : offset + _HEAD.size]
        if zlib.crc32(value, zlib.crc32(meta, zlib.crc32(lengths))) != crc:
            break
        try:
            topic, key, headers, spooled_at = orjson.loads(meta)
        except orjson.JSONDecodeError:
            break
        records.append(
            SpooledRecord(
                topic,
                key,
                [(n, v.encode("latin-1")) for n, v in headers],
                value,
                spooled_at,
                segment,
                end,
            )
        )
        offset = end
    return records, offset


@dataclass(slots=True)
class _Segment:
    number: int
    path: Path
    # Bytes on disk and fsynced (what a reader may read); the file holds exactly these
    # unless ``torn``.
    size: int = 0
    fd: int | None = None
    # A failed write could not be cut back yet: bytes past ``size`` to remove before
    # the next write.
    torn: bool = False


@dataclass(slots=True)
class _Append:
    frame: bytes
    key: tuple[str, str | None]
    done: asyncio.Future[None]


class Spool:
    """Segments of fsynced records, oldest first; see the module docstring.

    Lifetime: ``await open()`` → ``append``\\* / ``read`` + ``confirm`` → ``await close()``.
    Counters (events, bytes, keys) live on the event loop; file work runs on threads
    under one lock.
    """

    def __init__(
        self,
        directory: Path,
        max_bytes: int,
        segment_bytes: int,
        write_timeout_seconds: float = 2.0,
    ) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self.write_timeout_seconds = write_timeout_seconds
        self.events = 0
        # Records set aside in the dead-letter file (this run and earlier ones).
        self.dead_letters = 0
        self.bytes = 0
        self._keys: Counter[tuple[str, str | None]] = Counter()
        self._oldest: float | None = None
        self._segments: list[_Segment] = []
        self._lock = threading.Lock()
        self._lock_file: IO[bytes] | None = None
        # Where the drainer reads next: (segment number, offset).
        self._cursor: tuple[int, int] = (0, 0)
        self._pending: list[_Append] = []
        self._wake = asyncio.Event()
        self.changed = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._stopping = False
        # Monotonic time the running write+fsync started (None when idle).
        self._write_started: float | None = None
        # Why the last write failed; None once one succeeds (or a probe does).
        self._write_error: str | None = None
        # Size of the last frame refused for want of room: while it still would not
        # fit, the spool refuses (readiness must say so before the next event comes).
        self._refused_frame = 0
        # Group commits that failed; logged at a limited rate (the log may share the disk).
        self._failed_writes = 0
        self._log = ThrottledLog(log)

    # -- lifetime -------------------------------------------------------------------

    async def open(self) -> None:
        """Lock the directory, cut torn tails, and count what an earlier process left
        (the drainer sends it first)."""
        self._keys, self._oldest, self.dead_letters = await asyncio.to_thread(self._recover)
        self.events = self._keys.total()
        self.bytes = sum(s.size for s in self._segments)
        if self.events:
            log.warning(
                "spool %s holds %d events (%d bytes) from an earlier run; draining them to Kafka",
                self.directory,
                self.events,
                self.bytes,
            )
            self.changed.set()
        self._writer = asyncio.create_task(self._write_loop(), name="spool-writer")

    async def close(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)
        await asyncio.to_thread(self._close_files)

    # -- what the Kafka destination asks --------------------------------------------

    @property
    def writable(self) -> bool:
        return self._writer is not None and not self._writer.done()

    def stalled(self) -> bool:
        """Whether the running write has taken longer than ``write_timeout_seconds``."""
        started = self._write_started
        return started is not None and time.monotonic() - started > self.write_timeout_seconds

    def refusing_reason(self) -> str | None:
        """Why the spool would refuse the next event right now, or None when it takes
        it: the writer stopped, the disk is stalled, the last write failed (until a
        write or :meth:`recheck` works again), or the next event would not fit."""
        if not self.writable:
            return "the spool writer stopped"
        if self.stalled():
            return (
                f"spool disk stalled: a write has not returned in {self.write_timeout_seconds:g} s"
            )
        if self._write_error is not None:
            return f"spool write failed: {self._write_error}"
        if self._refused_frame and self.bytes + self._refused_frame > self.max_bytes:
            return f"spool full: it holds {self.bytes} of {self.max_bytes} bytes"
        return None

    async def recheck(self) -> None:
        """After a failed write, probe the disk (a small write + fsync) so that a freed
        disk is seen without waiting for the next event."""
        if self._write_error is None or self.stalled():
            return
        if await asyncio.to_thread(disk_accepts, self.directory, _PROBE_PREFIX, _PROBE_BYTES):
            self._write_error = None

    def holds(self, topic: str, key: str | None) -> bool:
        """Whether messages with this key wait in the spool (later ones must wait too)."""
        return self._keys.get((topic, key), 0) > 0

    @property
    def oldest_age(self) -> float:
        return 0.0 if self._oldest is None else max(0.0, time.time() - self._oldest)

    async def append(self, topic: str, key: str | None, headers: Headers, value: bytes) -> None:
        """Return once the message is fsynced; raise :class:`SpoolRefused` (full, or not
        fsynced within ``write_timeout_seconds``) or ``OSError`` (the write failed)."""
        if self.stalled():
            raise SpoolStalled(
                f"spool disk stalled: a write has not returned in {self.write_timeout_seconds:g} s"
            )
        now = time.time()
        frame = encode_record(topic, key, headers, value, now)
        if self.bytes + len(frame) > self.max_bytes:
            self._refused_frame = len(frame)
            raise SpoolFull(f"spool holds {self.bytes} of {self.max_bytes} bytes")
        spool_key = (topic, key)
        # Counted at once, before the fsync, so the next event with this key queues behind.
        self.bytes += len(frame)
        self.events += 1
        self._keys[spool_key] += 1
        if self._oldest is None:
            self._oldest = now
        loop = asyncio.get_running_loop()
        item = _Append(frame, spool_key, loop.create_future())
        self._pending.append(item)
        self._wake.set()
        timer = loop.call_later(self.write_timeout_seconds, self._expire, item)
        try:
            await item.done
        finally:
            timer.cancel()

    def _expire(self, item: _Append) -> None:
        """The append's deadline passed: its caller hears "not stored". If the record
        is not being written yet, it never will be (see :meth:`_write_loop`); if it is,
        it may still land and then reaches Kafka although its client was told 503."""
        if not item.done.done():
            item.done.set_exception(
                SpoolStalled(f"not fsynced within {self.write_timeout_seconds:g} s")
            )

    # -- what the drainer asks ------------------------------------------------------

    async def read(self, limit: int) -> list[SpooledRecord]:
        """Up to ``limit`` fsynced records from the cursor on, in spool order."""
        return await asyncio.to_thread(self._read, limit)

    async def set_aside(self, records: list[SpooledRecord], reason: str) -> None:
        """Append ``records`` (which Kafka refused for good) to the dead-letter file,
        fsynced, each with a header saying why; the caller then confirms them."""
        await asyncio.to_thread(self._write_dead_letters, records, reason)
        self.dead_letters += len(records)

    async def confirm(self, records: list[SpooledRecord]) -> None:
        """Kafka has ``records`` (the batch :meth:`read` returned, all of it), or they were
        set aside: move the cursor past them, persist it, and delete every segment left
        behind."""
        if not records:
            return
        last = records[-1]
        self._cursor = (last.segment, last.end)
        freed = await asyncio.to_thread(self._delete_drained)
        self.bytes -= freed
        # Counted out only once the cursor is on disk: whoever sees the spool empty (a
        # stop that follows, a restart) finds it empty on disk too. Until then the keys
        # are still held, so their next events keep queueing behind these.
        for record in records:
            spool_key = (record.topic, record.key)
            self._keys[spool_key] -= 1
            if self._keys[spool_key] <= 0:
                del self._keys[spool_key]
        self.events -= len(records)
        if self.events == 0:
            self._oldest = None
            log.info("spool %s is empty again: every spooled event is in Kafka", self.directory)
        else:
            self._oldest = last.spooled_at

    # -- internals (threads hold self._lock) -----------------------------------------

    async def _write_loop(self) -> None:
        while True:
            if not self._pending:
                if self._stopping:
                    return
                await self._wake.wait()
                self._wake.clear()
                continue
            batch, self._pending = self._pending, []
            # Appends whose deadline passed while queued were told "not stored": drop them.
            for item in batch:
                if item.done.done():
                    self._undo(item)
            batch = [item for item in batch if not item.done.done()]
            if not batch:
                continue
            self._write_started = time.monotonic()
            try:
                await asyncio.to_thread(self._write, [a.frame for a in batch])
            except OSError as exc:
                self._write_error = str(exc)
                self._failed_writes += 1
                self._log.error(
                    "write",
                    "spool %s: write failed, %d events answered 503: %s",
                    self.directory.name,
                    len(batch),
                    exc,
                )
                for item in batch:
                    self._undo(item)
                    if not item.done.done():
                        item.done.set_exception(exc)
                continue
            finally:
                self._write_started = None
            self._write_error = None
            for item in batch:
                if not item.done.done():
                    item.done.set_result(None)
            self.changed.set()

    def _undo(self, item: _Append) -> None:
        self.bytes -= len(item.frame)
        self.events -= 1
        self._keys[item.key] -= 1
        if self._keys[item.key] <= 0:
            del self._keys[item.key]

    @property
    def failed_writes(self) -> int:
        return self._failed_writes

    def _recover(self) -> tuple[Counter[tuple[str, str | None]], float | None, int]:
        """Keys of the records left on disk (after the persisted cursor), the oldest
        one's time and how many dead letters there are; one segment in memory at a
        time."""
        self.directory.mkdir(parents=True, exist_ok=True)
        lock_file = (self.directory / _LOCK_NAME).open("ab")
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.close()
            raise SpoolLocked(
                f"spool directory {self.directory} is used by another process; give each "
                "proxy process its own kafka.spool.directory"
            ) from None
        self._lock_file = lock_file
        keys: Counter[tuple[str, str | None]] = Counter()
        oldest: float | None = None
        drained_to = self._read_cursor()
        for path in sorted(self.directory.glob(f"segment-*{_SUFFIX}")):
            number = int(path.name[len("segment-") : -len(_SUFFIX)])
            if drained_to is not None and number < drained_to[0]:
                # Drained in full; the process stopped before it could delete it.
                path.unlink()
                continue
            data = path.read_bytes()
            found, valid = decode_records(data, number)
            if valid < len(data):
                log.warning(
                    "spool segment %s: %d bytes after the last whole record cut off "
                    "(a write interrupted by a crash); %d records before it kept",
                    path,
                    len(data) - valid,
                    len(found),
                )
                with path.open("r+b") as handle:
                    handle.truncate(valid)
                    os.fsync(handle.fileno())
            if not found:
                path.unlink()
                continue
            start = 0
            if not self._segments and drained_to is not None and drained_to[0] == number:
                ends = {0, *(r.end for r in found)}
                start = drained_to[1] if drained_to[1] in ends else 0
            left = [r for r in found if r.end > start]
            keys.update((r.topic, r.key) for r in left)
            if left and oldest is None:
                oldest = left[0].spooled_at
            self._segments.append(_Segment(number, path, valid))
            if len(self._segments) == 1:
                self._cursor = (number, start)
        if not self._segments and drained_to is not None:
            # New segments are numbered after the drained ones (the cursor names them).
            self._cursor = (drained_to[0], 0)
        dead_path = self.directory / DEAD_LETTER_FILE
        dead = len(read_dead_letters(dead_path)) if dead_path.exists() else 0
        return keys, oldest, dead

    def _read_cursor(self) -> tuple[int, int] | None:
        """The persisted drain cursor, or None (absent or unreadable: start at 0)."""
        try:
            data = (self.directory / _CURSOR_NAME).read_bytes()
        except FileNotFoundError:
            return None
        if len(data) != _CURSOR.size:
            return None
        number, offset, crc = _CURSOR.unpack(data)
        if zlib.crc32(data[:16]) != crc:
            log.warning("spool %s: unreadable drain cursor ignored", self.directory)
            return None
        return number, offset

    def _persist_cursor(self) -> None:
        """Write the cursor in place (20 bytes, one sector) and fsync: after a restart
        the drain goes on from here instead of resending the segment from its start.
        A crash between Kafka's confirmation and this write resends one drain batch."""
        number, offset = self._cursor
        head = struct.pack(">QQ", number, offset)
        data = head + struct.pack(">I", zlib.crc32(head))
        try:
            fd = os.open(
                self.directory / _CURSOR_NAME, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644
            )
            try:
                write_all_at(fd, data, 0)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            self._log.warning(
                "cursor",
                "spool %s: drain cursor not saved (%s); a restart may resend up to one "
                "segment of events",
                self.directory.name,
                exc,
            )

    def _write(self, frames: list[bytes]) -> None:
        """Write + fsync ``frames`` at the end of the active segment, all or nothing:
        on failure the segment is cut back to its fsynced length."""
        with self._lock:
            active = self._segments[-1] if self._segments else None
            if active is not None and active.torn:
                _cut_back(active)  # raises while the cut still fails: nothing written
            if active is None or active.fd is None or active.size >= self.segment_bytes:
                if active is not None and active.fd is not None:
                    os.close(active.fd)
                    active.fd = None
                active = self._new_segment()
            assert active.fd is not None
            data = b"".join(frames)
            try:
                write_all_at(active.fd, data, active.size)
                os.fsync(active.fd)
            except OSError:
                # Nothing of a refused batch may stay: its clients hear 503 and resend.
                with contextlib.suppress(OSError):
                    _cut_back(active)
                raise
            active.size += len(data)

    def _new_segment(self) -> _Segment:
        number = (self._segments[-1].number if self._segments else self._cursor[0]) + 1
        path = self.directory / f"segment-{number:012d}{_SUFFIX}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            fsync_directory(self.directory)
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        segment = _Segment(number, path, 0, fd)
        self._segments.append(segment)
        if len(self._segments) == 1:
            self._cursor = (number, 0)
        return segment

    def _write_dead_letters(self, records: list[SpooledRecord], reason: str) -> None:
        header = (REFUSED_HEADER, reason.encode("utf-8", "replace"))
        data = b"".join(
            encode_record(r.topic, r.key, [*r.headers, header], r.value, r.spooled_at)
            for r in records
        )
        path = self.directory / DEAD_LETTER_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                write_all_at(fd, data, size)
                os.fsync(fd)
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)
        if size == 0:
            fsync_directory(self.directory)

    def _read(self, limit: int) -> list[SpooledRecord]:
        with self._lock:
            number, offset = self._cursor
            segment = next((s for s in self._segments if s.number == number), None)
            if segment is None:
                if not self._segments:
                    return []
                segment, offset = self._segments[0], 0
                self._cursor = (segment.number, 0)
            size = segment.size
            path = segment.path
        if offset >= size:
            return []
        with path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read(min(size - offset, _READ_CHUNK))
            records, _ = decode_records(data, segment.number)
            if not records:  # one record larger than a chunk
                data += handle.read(size - offset - len(data))
                records, _ = decode_records(data, segment.number)
        # decode_records counts ends from 0 in ``data``: shift them to file offsets.
        return [dataclasses.replace(r, end=r.end + offset) for r in records[:limit]]

    def _delete_drained(self) -> int:
        """Delete segments the cursor has passed; returns the bytes freed."""
        freed = 0
        with self._lock:
            while self._segments:
                first = self._segments[0]
                number, offset = self._cursor
                if first.number > number or offset < first.size:
                    break
                # The active segment goes too once drained: the next write opens a new one.
                if first.fd is not None:
                    os.close(first.fd)
                    first.fd = None
                first.path.unlink(missing_ok=True)
                freed += first.size
                self._segments.pop(0)
                if self._segments:
                    self._cursor = (self._segments[0].number, 0)
                else:
                    self._cursor = (first.number, 0)
            self._persist_cursor()
        return freed

    def _close_files(self) -> None:
        with self._lock:
            for segment in self._segments:
                if segment.fd is not None:
                    os.close(segment.fd)
                    segment.fd = None
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None


def _cut_back(segment: _Segment) -> None:
    """Cut ``segment``'s file to its fsynced length; remembers (``torn``) when it fails."""
    assert segment.fd is not None
    segment.torn = True
    os.ftruncate(segment.fd, segment.size)
    os.fsync(segment.fd)
    segment.torn = False
