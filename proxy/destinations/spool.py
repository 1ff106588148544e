"""A write-ahead spool: Kafka messages kept on local disk while the broker cannot take them.

The Kafka destination appends a message here when the broker does not confirm in time or
is known to be down, and the client gets its 2xx once the record is fsynced; a drainer
(:mod:`proxy.destinations.kafka_spool`) forwards records to Kafka in order and lets the
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
and throughput is not one fsync per event.
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

__all__ = [
    "Spool",
    "SpoolFull",
    "SpoolLocked",
    "SpooledRecord",
    "decode_records",
    "encode_record",
    "holds_segments",
]

log = logging.getLogger(__name__)

_HEAD = struct.Struct(">III")
_SUFFIX = ".spool"
_LOCK_NAME = ".lock"
# How much of a segment the drainer reads at a time.
_READ_CHUNK = 4 * 1024 * 1024

Headers = list[tuple[str, bytes]]


class SpoolFull(Exception):
    """The spool holds ``max_bytes`` already; the event was not stored."""


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
    # Bytes on disk and fsynced (what a reader may read).
    size: int = 0
    handle: IO[bytes] | None = None


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

    def __init__(self, directory: Path, max_bytes: int, segment_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self.events = 0
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

    # -- lifetime -------------------------------------------------------------------

    async def open(self) -> None:
        """Lock the directory, cut torn tails, and count what an earlier process left
        (the drainer sends it first)."""
        self._keys, self._oldest = await asyncio.to_thread(self._recover)
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

    def holds(self, topic: str, key: str | None) -> bool:
        """Whether messages with this key wait in the spool (later ones must wait too)."""
        return self._keys.get((topic, key), 0) > 0

    @property
    def oldest_age(self) -> float:
        return 0.0 if self._oldest is None else max(0.0, time.time() - self._oldest)

    async def append(self, topic: str, key: str | None, headers: Headers, value: bytes) -> None:
        """Return once the message is fsynced; raise :class:`SpoolFull` or ``OSError``."""
        now = time.time()
        frame = encode_record(topic, key, headers, value, now)
        if self.bytes + len(frame) > self.max_bytes:
            raise SpoolFull(f"spool {self.directory} holds {self.bytes} of {self.max_bytes} bytes")
        spool_key = (topic, key)
        # Counted at once, before the fsync, so the next event with this key queues behind.
        self.bytes += len(frame)
        self.events += 1
        self._keys[spool_key] += 1
        if self._oldest is None:
            self._oldest = now
        done = asyncio.get_running_loop().create_future()
        self._pending.append(_Append(frame, spool_key, done))
        self._wake.set()
        await done

    # -- what the drainer asks ------------------------------------------------------

    async def read(self, limit: int) -> list[SpooledRecord]:
        """Up to ``limit`` fsynced records from the cursor on, in spool order."""
        return await asyncio.to_thread(self._read, limit)

    async def confirm(self, records: list[SpooledRecord]) -> None:
        """Kafka has ``records`` (the batch :meth:`read` returned, all of it): move the
        cursor past them and delete every segment left behind."""
        if not records:
            return
        for record in records:
            spool_key = (record.topic, record.key)
            self._keys[spool_key] -= 1
            if self._keys[spool_key] <= 0:
                del self._keys[spool_key]
        self.events -= len(records)
        last = records[-1]
        self._cursor = (last.segment, last.end)
        freed = await asyncio.to_thread(self._delete_drained)
        self.bytes -= freed
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
            try:
                await asyncio.to_thread(self._write, [a.frame for a in batch])
            except OSError as exc:
                log.error("spool write failed: %s", exc)
                for item in batch:
                    self._undo(item)
                    if not item.done.done():
                        item.done.set_exception(exc)
                continue
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

    def _recover(self) -> tuple[Counter[tuple[str, str | None]], float | None]:
        """Keys of the records left on disk and the oldest one's time; one segment in
        memory at a time."""
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
        for path in sorted(self.directory.glob(f"segment-*{_SUFFIX}")):
            number = int(path.name[len("segment-") : -len(_SUFFIX)])
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
            keys.update((r.topic, r.key) for r in found)
            oldest = found[0].spooled_at if oldest is None else oldest
            self._segments.append(_Segment(number, path, valid))
        if self._segments:
            self._cursor = (self._segments[0].number, 0)
        return keys, oldest

    def _write(self, frames: list[bytes]) -> None:
        with self._lock:
            active = self._segments[-1] if self._segments else None
            if active is None or active.handle is None or active.size >= self.segment_bytes:
                if active is not None and active.handle is not None:
                    active.handle.close()
                    active.handle = None
                active = self._new_segment()
            assert active.handle is not None
            data = b"".join(frames)
            try:
                active.handle.write(data)
                active.handle.flush()
                os.fsync(active.handle.fileno())
            except OSError:
                # Cut back to what was fsynced so no half record stays in the middle.
                with contextlib.suppress(OSError):
                    active.handle.truncate(active.size)
                raise
            active.size += len(data)

    def _new_segment(self) -> _Segment:
        number = (self._segments[-1].number if self._segments else self._cursor[0]) + 1
        path = self.directory / f"segment-{number:012d}{_SUFFIX}"
        segment = _Segment(number, path, 0, path.open("ab"))
        self._segments.append(segment)
        if len(self._segments) == 1:
            self._cursor = (number, 0)
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return segment

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
                if first.handle is not None:
                    first.handle.close()
                    first.handle = None
                first.path.unlink(missing_ok=True)
                freed += first.size
                self._segments.pop(0)
                if self._segments:
                    self._cursor = (self._segments[0].number, 0)
                else:
                    self._cursor = (first.number, 0)
        return freed

    def _close_files(self) -> None:
        with self._lock:
            for segment in self._segments:
                if segment.handle is not None:
                    segment.handle.close()
                    segment.handle = None
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None
