"""The archive: append-only JSON Lines files, partitioned for Spark, fsynced before acking.

Used by the proxy (an ``archive`` destination in a rules file), by the consumer daemons
(Kafka → archive) and read by the Spark jobs; all of them import this module. Partition
and file naming live in :mod:`proxy.destinations.archive.layout` (re-exported here).

Layout under the archive directory::

    dt=2026-11-23/namespace=team-a/events-20261123T110500Z-4242-0001-3f9c.jsonl
    dt=2026-11-23/namespace=s3%3A%2F%2Fbucket/events-...-0002-....jsonl.gz
    dt=2026-11-23/namespace=team-a/_events-...-0003-....jsonl.inprogress   (being written)

- ``dt`` and ``namespace``: see :mod:`proxy.destinations.archive.layout` (UTC date,
  Hive-escaped namespace, shortened with a digest when too long for a file name).
- One event per line: the exact bytes the destination was handed, then ``\\n``.
- A file is written under a name starting with ``_`` and ending in ``.inprogress``;
  on rotation (size or age) it is fsynced, closed and renamed to its final name, so a
  final name only ever holds whole lines. **Readers must ignore names starting with
  ``_`` or ``.``** — Spark and Hadoop do by default, so ``spark.read.json(directory)``
  sees only finished files, with ``dt`` and ``namespace`` as partition columns.
  (Set ``spark.sql.sources.partitionColumnTypeInference.enabled=false`` if a namespace
  could look like a number.)
- gzip files are a sequence of gzip members, one per group commit, so every fsynced
  prefix is a valid gzip stream; gzip readers (Python, Hadoop/Spark) read them whole.
- Durability: :meth:`ArchiveWriter.write` returns only after the line is fsynced.
  Concurrent writes are group-committed: everything that arrived while the previous
  write+fsync ran goes to disk in the next one, on a worker thread, so throughput is
  not one fsync per event and the event loop never blocks. Each partition of a group
  commits on its own: a failure in one fails only the events of that partition.
- Failures: files are written with unbuffered ``os.write`` in append mode, so nothing
  is held in memory that a later close could fail on. A failed write (disk full, I/O
  error) is cut back to the file's last fsynced length and fails its events with a
  retriable error (the client gets 503 + Retry-After); the next write simply tries
  again, so the writer recovers by itself once space is back. A write that does not
  return within ``write_timeout_seconds`` (a stalled disk) fails the same way, and
  while one is stuck new writes fail at once. :meth:`ArchiveWriter.writable` (``/readyz``)
  is false while the last commit failed and a small probe write still fails.
- Several processes may write to one directory: names carry the pid and a random part,
  and an in-progress file is held under an exclusive ``flock``. In-progress files
  nobody holds (left by a crash, or one whose cut-back itself failed) are finalised at
  start and retried while running: a torn last line (bytes after the last ``\\n``; an
  incomplete last gzip member) is cut first, so no finished file holds a torn line.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proxy.destinations.archive.config import ArchiveDestinationConfig
from proxy.destinations.archive.layout import (
    DEFAULT_PARTITION,
    IN_PROGRESS_SUFFIX,
    archive_directory,
    archive_file_name,
    escape_partition_value,
    event_partition,
    finished_files,
    finished_name,
    in_progress_files,
    is_finished_file,
)
from proxy.destinations.base import DeliveryError, Destination
from proxy.destinations.disk_writes import disk_accepts, fsync_directory, write_all
from proxy.support.throttled_log import ThrottledLog

if TYPE_CHECKING:
    from proxy.destinations.registry import DestinationResources

__all__ = [
    "DEFAULT_PARTITION",
    "IN_PROGRESS_SUFFIX",
    "ArchiveDestination",
    "ArchiveWriter",
    "build",
    "escape_partition_value",
    "event_partition",
    "finished_files",
    "gzip_member",
    "in_progress_files",
    "is_finished_file",
]

log = logging.getLogger(__name__)

MiB = 1024 * 1024
# Errors that no retry can cure: the event is refused for good (422), not looped on.
_PERMANENT_ERRNOS = frozenset({errno.ENAMETOOLONG, errno.EILSEQ})
_PROBE_PREFIX = "_probe-"
# Room the probe asks for: about one group commit of typical events.
_PROBE_BYTES = 64 * 1024


@dataclass(slots=True)
class _OpenFile:
    """One in-progress file of one partition."""

    path: Path
    final_path: Path
    fd: int
    opened_at: float
    # Bytes in the file, all fsynced: a commit either lands whole or is cut back.
    size: int = 0


class _Writes:
    """The events of one :meth:`ArchiveWriter.write_many` call: one future for all of
    them, resolved once each is fsynced or failed (event loop only)."""

    __slots__ = ("done", "errors", "left")

    def __init__(self, done: asyncio.Future[None], count: int) -> None:
        self.done = done
        self.left = count
        self.errors: list[DeliveryError | None] = [None] * count

    def settle(self, index: int, error: DeliveryError | None) -> None:
        if self.done.done():
            return  # expired: the writer was answered already
        self.errors[index] = error
        self.left -= 1
        if self.left == 0 and not self.done.done():
            self.done.set_result(None)

    def expire(self, error: DeliveryError) -> None:
        """Whatever is not settled by now fails; its writer was told "not stored"."""
        if not self.done.done():
            self.errors = [e if e is not None else error for e in self.errors]
            self.done.set_result(None)


@dataclass(slots=True)
class _Pending:
    partition: str
    line: bytes
    writes: _Writes
    index: int


class ArchiveWriter:
    """Append events to partitioned JSON Lines files; see the module docstring.

    Lifetime: ``await start()`` → ``await write(...)``\\* → ``await close()``.
    """

    def __init__(
        self,
        directory: Path | str,
        *,
        gzip: bool = False,
        max_file_bytes: int = 128 * MiB,
        max_file_age_seconds: float = 300.0,
        max_open_files: int = 64,
        write_timeout_seconds: float = 4.0,
        file_prefix: str = "events",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = Path(directory)
        self.gzip = gzip
        self.max_file_bytes = max_file_bytes
        self.max_file_age_seconds = max_file_age_seconds
        self.max_open_files = max_open_files
        self.write_timeout_seconds = write_timeout_seconds
        self.file_prefix = file_prefix
        self._clock = clock
        # A full or failing disk fails every commit: one line per kind of failure at most
        # every few seconds, not one per commit (perhaps onto that same disk).
        self._failure_log = ThrottledLog(log)
        self._open: dict[str, _OpenFile] = {}
        # In-progress files closed after a failure, to finalise once the disk allows, with
        # their fsynced length when known (else they are cut after their last whole line).
        self._orphans: list[tuple[Path, int | None]] = []
        self._pending: list[_Pending] = []
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._sequence = 0
        self._tag = f"{os.getpid()}"
        # Loop time the running commit started at (None when idle): a stall detector.
        self._commit_started: float | None = None
        # Why the last commit failed (disk full, I/O error); None once one succeeds.
        self._failure: str | None = None

    # -- public API -------------------------------------------------------------------

    async def start(self) -> None:
        # Kept: on Python 3.11 every get_running_loop() is a getpid() system call.
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._prepare_directory)
        self._worker = asyncio.create_task(self._run(), name=f"archive-writer:{self.directory}")

    async def write(self, event: dict[str, Any], payload: bytes) -> None:
        """Return once ``payload`` (the serialized ``event``) is fsynced in its partition.

        Raises a retriable :class:`DeliveryError` when the disk failed or did not answer
        within ``write_timeout_seconds``."""
        [error] = await self.write_many([(event, payload)])
        if error is not None:
            raise error

    async def write_many(
        self, items: Sequence[tuple[dict[str, Any], bytes]]
    ) -> list[DeliveryError | None]:
        """:meth:`write` for many events, awaited on one future and one timer; per event
        None once fsynced, else why not (its partition failed, or the deadline passed)."""
        if self._worker is None or self._closing:
            raise self._error("archive writer is not running")
        if self.stalled():
            raise self._error(
                f"disk stalled: a write has not returned in {self.write_timeout_seconds:g} s"
            )
        loop = self._loop
        assert loop is not None  # set by start(), checked above through _worker
        writes = _Writes(loop.create_future(), len(items))
        self._pending += [
            _Pending(event_partition(event), payload + b"\n", writes, index)
            for index, (event, payload) in enumerate(items)
        ]
        self._wake.set()
        timer = loop.call_later(self.write_timeout_seconds, self._expire, writes)
        try:
            await writes.done
        finally:
            timer.cancel()
        return writes.errors

    async def close(self) -> None:
        """Write what is pending, finish every open file, stop the worker."""
        self._closing = True
        self._wake.set()
        if self._worker is not None:
            await self._worker
            self._worker = None
        await asyncio.to_thread(self._finish_all)

    def _expire(self, writes: _Writes) -> None:
        # The error is built only when a deadline passes, not for every request.
        writes.expire(self._error(f"not written within {self.write_timeout_seconds:g} s"))

    def stalled(self) -> bool:
        """Whether the running commit has taken longer than ``write_timeout_seconds``."""
        started = self._commit_started
        return started is not None and time.monotonic() - started > self.write_timeout_seconds

    def writable(self) -> bool:
        """Whether writes can succeed now. Blocking; call from a thread."""
        if self.stalled():
            return False
        if not (self.directory.is_dir() and os.access(self.directory, os.W_OK)):
            return False
        return self._failure is None or self._probe()

    def _error(self, reason: str, *, retriable: bool = True) -> DeliveryError:
        return DeliveryError(str(self.directory), reason, retriable=retriable)

    # -- worker -----------------------------------------------------------------------

    async def _run(self) -> None:
        # The age check runs at least this often even with no traffic, so an idle
        # partition's file still gets its final name within about max_file_age_seconds.
        tick = min(1.0, self.max_file_age_seconds / 2)
        while True:
            if not self._pending:
                if self._closing:
                    return
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), tick)
            # Writers that gave up waiting were told "not stored": leave them out.
            batch = [item for item in self._pending if not item.writes.done.done()]
            self._pending = []
            self._commit_started = time.monotonic()
            try:
                failures = await asyncio.to_thread(self._commit, batch)
            except Exception as exc:  # a bug of ours: fail this batch, keep the writer
                log.exception("archive %s: commit failed", self.directory)
                failures = {item.partition: exc for item in batch}
            finally:
                self._commit_started = None
            self._settle(batch, failures)

    def _settle(self, batch: list[_Pending], failures: dict[str, Exception]) -> None:
        """Answer every waiting writer, and remember whether the disk is failing."""
        transient = [e for e in failures.values() if _retriable(e)]
        if transient:
            self._failure = str(transient[0])
        elif len(failures) < len({item.partition for item in batch}):
            self._failure = None  # something was written: the disk works again
        for item in batch:
            error = failures.get(item.partition)
            if error is None:
                item.writes.settle(item.index, None)
            else:
                reason = f"write failed: {error}"
                item.writes.settle(item.index, self._error(reason, retriable=_retriable(error)))

    # -- blocking part, on a worker thread ----------------------------------------------

    def _prepare_directory(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for probe in self.directory.glob(f"{_PROBE_PREFIX}*"):
            with contextlib.suppress(OSError):
                probe.unlink()
        for leftover in self.directory.glob(f"dt=*/namespace=*/_*{IN_PROGRESS_SUFFIX}"):
            self._orphans.append((leftover, None))
        self._recover_orphans()

    def _recover(self, path: Path, synced: int | None) -> None:
        """Finalise an in-progress file whose writer is gone (nobody holds its lock),
        cut back to ``synced`` bytes if known, else after its last whole line."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return  # another writer recovered it first
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another live writer owns it
            if not path.exists():
                return  # finalised by another writer between our open and lock
            size = os.fstat(fd).st_size
            whole = _whole_length(fd, size, gzip=path.name.endswith(f".gz{IN_PROGRESS_SUFFIX}"))
            if synced is not None:
                whole = min(whole, synced)
            if whole < size:
                os.ftruncate(fd, whole)
                os.fsync(fd)
                log.warning("archive: cut a torn last line (%d bytes) from %s", size - whole, path)
            if whole == 0:
                path.unlink()
                return
            final = finished_name(path)
            os.rename(path, final)
            fsync_directory(path.parent)
            log.warning("archive: finalised %s left in progress by a stopped writer", final)
        finally:
            os.close(fd)  # releases the lock only after the rename

    def _commit(self, batch: list[_Pending]) -> dict[str, Exception]:
        """Append each partition's lines; return the failures by partition."""
        now = self._clock()
        by_partition: dict[str, list[bytes]] = {}
        for item in batch:
            by_partition.setdefault(item.partition, []).append(item.line)
        failures: dict[str, Exception] = {}
        for partition, lines in by_partition.items():
            try:
                self._append(partition, b"".join(lines), now)
            except Exception as exc:
                self._failure_log.error(
                    f"write:{type(exc).__name__}:{getattr(exc, 'errno', None)}",
                    "archive %s/%s: write failed: %s",
                    self.directory,
                    partition,
                    exc,
                )
                failures[partition] = exc
        for partition in [p for p, f in self._open.items() if self._due(f, now)]:
            self._finish(partition)
        while len(self._open) > self.max_open_files:
            self._finish(min(self._open, key=lambda p: self._open[p].opened_at))
        if self._orphans and not failures:
            self._recover_orphans()
        return failures

    def _append(self, partition: str, data: bytes, now: float) -> None:
        current = self._open.get(partition)
        if current is not None and self._due(current, now):
            self._finish(partition)
            current = None
        if current is None:
            current = self._open_file(partition, now)
        if self.gzip:
            data = gzip_member(data)
        try:
            write_all(current.fd, data)
            os.fsync(current.fd)
        except BaseException:
            self._cut_back(partition, current)
            raise
        current.size += len(data)

    def _cut_back(self, partition: str, current: _OpenFile) -> None:
        """After a failed write: remove its bytes (a torn line must not reach a reader,
        and the refused events must not be stored). If even that fails, the file is
        given up and finalised later, cut to its fsynced length."""
        try:
            os.ftruncate(current.fd, current.size)
            os.fsync(current.fd)
        except OSError as exc:
            log.error("archive: could not cut %s back: %s", current.path, exc)
            self._open.pop(partition)
            self._orphan(current)

    def _orphan(self, current: _OpenFile) -> None:
        """Give up an in-progress file: unlock it and finalise it later (cut first)."""
        with contextlib.suppress(OSError):
            os.close(current.fd)
        self._orphans.append((current.path, current.size))

    def _recover_orphans(self) -> None:
        orphans, self._orphans = self._orphans, []
        for path, synced in orphans:
            try:
                self._recover(path, synced)
            except OSError as exc:  # e.g. still a full disk: try again later
                log.error("archive: could not finalise %s yet: %s", path, exc)
                self._orphans.append((path, synced))

    def _due(self, current: _OpenFile, now: float) -> bool:
        return (
            current.size >= self.max_file_bytes
            or now - current.opened_at >= self.max_file_age_seconds
        )

    def _open_file(self, partition: str, now: float) -> _OpenFile:
        folder = self.directory / partition
        new_folder = not folder.is_dir()
        folder.mkdir(parents=True, exist_ok=True)
        self._sequence += 1
        name = archive_file_name(self.file_prefix, self._tag, self._sequence, gzip=self.gzip)
        final = folder / name
        path = folder / f"_{name}{IN_PROGRESS_SUFFIX}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # The new name must survive a crash too, or fsynced lines could be lost with it.
            fsync_directory(folder)
            if new_folder:
                fsync_directory(folder.parent)
                fsync_directory(folder.parent.parent)
        except BaseException:
            with contextlib.suppress(OSError):
                path.unlink()
            os.close(fd)
            raise
        opened = _OpenFile(path=path, final_path=final, fd=fd, opened_at=now)
        self._open[partition] = opened
        return opened

    def _finish(self, partition: str) -> Path | None:
        """Give an open file its final name; on failure leave it to :meth:`_recover`."""
        current = self._open.pop(partition)
        if current.size == 0:  # every write to it failed
            with contextlib.suppress(OSError):
                current.path.unlink()
            with contextlib.suppress(OSError):
                os.close(current.fd)
            return None
        try:
            os.fsync(current.fd)
            os.rename(current.path, current.final_path)
            fsync_directory(current.final_path.parent)
        except OSError as exc:
            log.error("archive: could not finish %s yet: %s", current.path, exc)
            self._orphan(current)
            return None
        with contextlib.suppress(OSError):
            os.close(current.fd)  # releases the lock only after the rename
        return current.final_path

    def _finish_all(self) -> None:
        for partition in list(self._open):
            self._finish(partition)
        self._recover_orphans()

    def _probe(self) -> bool:
        """Whether a small write + fsync works now (after a failure, for readiness)."""
        return disk_accepts(self.directory, f"{_PROBE_PREFIX}{self._tag}-", _PROBE_BYTES)


def _retriable(error: Exception) -> bool:
    return not (isinstance(error, OSError) and error.errno in _PERMANENT_ERRNOS)


def _whole_length(fd: int, size: int, *, gzip: bool) -> int:
    """Length of the file's prefix that holds only whole lines (whole gzip members)."""
    return _whole_gzip_length(fd, size) if gzip else _whole_lines_length(fd, size)


def _whole_lines_length(fd: int, size: int, chunk: int = 64 * 1024) -> int:
    end = size
    while end > 0:
        start = max(0, end - chunk)
        newline = os.pread(fd, end - start, start).rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0


def _whole_gzip_length(fd: int, size: int, chunk: int = MiB) -> int:
    whole = 0  # offset just after the last complete member
    position = 0
    inflater = zlib.decompressobj(31)
    while position < size:
        data = os.pread(fd, min(chunk, size - position), position)
        if not data:
            break
        position += len(data)
        while data:
            try:
                inflater.decompress(data)
            except zlib.error:
                return whole
            if not inflater.eof:
                break
            data = inflater.unused_data
            whole = position - len(data)
            inflater = zlib.decompressobj(31)
    return whole


def gzip_member(data: bytes) -> bytes:
    """``data`` as one whole gzip member (concatenated members are one valid stream)."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: gzip header and trailer
    return compressor.compress(data) + compressor.flush()


class ArchiveDestination(Destination):
    """The archive as a proxy destination: durable, so the client's 2xx waits for fsync."""

    durable = True

    def __init__(self, name: str, writer: ArchiveWriter) -> None:
        self.name = name
        self.writer = writer

    async def start(self) -> None:
        await self.writer.start()

    async def deliver(self, event: dict[str, Any], payload: bytes) -> None:
        [error] = await self.deliver_many([(event, payload)])
        if error is not None:
            raise error

    async def deliver_many(
        self, items: Sequence[tuple[dict[str, Any], bytes]]
    ) -> list[DeliveryError | None]:
        """Per event None once fsynced, else why not (named after this destination)."""
        try:
            errors = await self.writer.write_many(items)
        except DeliveryError as exc:
            errors = [exc] * len(items)
        return [
            None if e is None else DeliveryError(self.name, e.reason, retriable=e.retriable)
            for e in errors
        ]

    async def ready(self) -> bool:
        return await asyncio.to_thread(self.writer.writable)

    async def close(self) -> None:
        await self.writer.close()


async def build(
    name: str, config: ArchiveDestinationConfig, resources: DestinationResources
) -> ArchiveDestination:
    """An (unstarted) archive destination, for a route or a consumer's ``archive`` target;
    a relative directory is placed under the archive root of config.yaml."""
    writer = ArchiveWriter(
        archive_directory(config.directory, resources.archive_root),
        gzip=config.gzip,
        max_file_bytes=config.max_file_bytes,
        max_file_age_seconds=config.max_file_age_seconds,
        max_open_files=config.max_open_files,
        write_timeout_seconds=config.write_timeout_seconds,
    )
    return ArchiveDestination(name, writer)
