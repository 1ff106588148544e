"""The archive: append-only JSON Lines files, partitioned for Spark, fsynced before acking.

Used by the proxy (an ``archive`` destination in a rules file), by the consumer daemons
(Kafka → archive) and read by the Spark jobs; all of them import this module.

Layout under the archive directory::

    dt=2026-11-23/namespace=team-a/events-20261123T110500Z-4242-0001-3f9c.jsonl
    dt=2026-11-23/namespace=s3%3A%2F%2Fbucket/events-...-0002-....jsonl.gz
    dt=2026-11-23/namespace=team-a/_events-...-0003-....jsonl.inprogress   (being written)

- ``dt`` is the UTC date of the event's ``eventTime``; ``namespace`` is the job namespace
  (a DatasetEvent's dataset namespace), escaped the way Hive and Spark escape partition
  values (``%`` + two hex digits for ``"#%'*/:=?\\{[]^``, control characters and DEL),
  so Spark's partition discovery gives back the original string. An empty namespace is
  ``__HIVE_DEFAULT_PARTITION__``.
- One event per line: the exact bytes the destination was handed, then ``\\n``.
- A file is written under a name starting with ``_`` and ending in ``.inprogress``;
  on rotation (size or age) it is fsynced, closed and renamed to its final name, so a
  final name only ever holds a complete file. **Readers must ignore names starting with
  ``_`` or ``.``** — Spark and Hadoop do by default, so ``spark.read.json(directory)``
  sees only finished files, with ``dt`` and ``namespace`` as partition columns.
  (Set ``spark.sql.sources.partitionColumnTypeInference.enabled=false`` if a namespace
  could look like a number.)
- gzip files are a sequence of gzip members, one per group commit, so every fsynced
  prefix is a valid gzip stream; gzip readers (Python, Hadoop/Spark) read them whole.
- Durability: :meth:`ArchiveWriter.write` returns only after the line is fsynced.
  Concurrent writes are group-committed: everything that arrived while the previous
  write+fsync ran goes to disk in the next one, on a worker thread, so throughput is
  not one fsync per event and the event loop never blocks.
- Several processes may write to one directory: names carry the pid and a random part,
  and an in-progress file is held under an exclusive ``flock``. At start a writer
  finalises in-progress files nobody holds (left by a crash; their fsynced lines are
  kept).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import time
import uuid
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from proxy.destinations.base import DeliveryError
from proxy.openlineage import subject_name

__all__ = [
    "DEFAULT_PARTITION",
    "IN_PROGRESS_SUFFIX",
    "ArchiveDestination",
    "ArchiveDestinationConfig",
    "ArchiveWriter",
    "archive_destination",
    "escape_partition_value",
    "event_partition",
    "finished_files",
    "is_finished_file",
]

log = logging.getLogger(__name__)

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
IN_PROGRESS_SUFFIX = ".inprogress"
MiB = 1024 * 1024

# Characters Hive/Spark escape in partition values (ExternalCatalogUtils.charToEscape).
_ESCAPED = frozenset("\"#%'*/:=?\\{[]^\x7f") | frozenset(chr(c) for c in range(1, 0x20))


def escape_partition_value(value: str) -> str:
    """Escape a partition value as Hive/Spark do, so partition discovery reverses it."""
    if not value:
        return DEFAULT_PARTITION
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED or c == "\x00" else c for c in value)


def _event_date(event: dict[str, Any]) -> str:
    event_time = event.get("eventTime")
    if isinstance(event_time, str):
        # The common case, already UTC: no parsing needed.
        if event_time.endswith(("Z", "z", "+00:00")) and event_time[4:5] == "-":
            return event_time[:10]
        try:
            parsed = datetime.fromisoformat(event_time)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed.astimezone(UTC).date().isoformat()
    # Unparseable or naive (not valid OpenLineage): file under the day it arrived.
    return datetime.now(UTC).date().isoformat()


def event_partition(event: dict[str, Any]) -> str:
    """``dt=YYYY-MM-DD/namespace=<escaped>`` for an event (a relative directory)."""
    subject = subject_name(event)
    namespace = subject[0] if subject else ""
    return f"dt={_event_date(event)}/namespace={escape_partition_value(namespace)}"


def is_finished_file(path: Path) -> bool:
    """Whether a reader should read ``path`` (not in progress, not hidden)."""
    return not path.name.startswith(("_", "."))


@dataclass(slots=True)
class _OpenFile:
    """One in-progress file of one partition."""

    path: Path
    final_path: Path
    handle: IO[bytes]
    opened_at: float
    size: int = 0
    # Bytes known to be on disk (fsynced); what a failed commit is cut back to.
    synced: int = 0


@dataclass(slots=True)
class _Pending:
    partition: str
    line: bytes
    done: asyncio.Future[None]


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
        file_prefix: str = "events",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = Path(directory)
        self.gzip = gzip
        self.max_file_bytes = max_file_bytes
        self.max_file_age_seconds = max_file_age_seconds
        self.max_open_files = max_open_files
        self.file_prefix = file_prefix
        self._clock = clock
        self._open: dict[str, _OpenFile] = {}
        self._pending: list[_Pending] = []
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._closing = False
        self._sequence = 0
        self._tag = f"{os.getpid()}"

    # -- public API -------------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(self._prepare_directory)
        self._worker = asyncio.create_task(self._run(), name=f"archive-writer:{self.directory}")

    async def write(self, event: dict[str, Any], payload: bytes) -> None:
        """Return once ``payload`` (the serialized ``event``) is fsynced in its partition."""
        if self._worker is None or self._closing:
            raise DeliveryError(
                str(self.directory), "archive writer is not running", retriable=True
            )
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(event_partition(event), payload + b"\n", done))
        self._wake.set()
        await done

    async def rotate(self) -> list[Path]:
        """Finish every open file now (fsync, rename); return the final paths."""
        return await asyncio.to_thread(self._finish_all)

    async def close(self) -> None:
        """Write what is pending, finish every open file, stop the worker."""
        self._closing = True
        self._wake.set()
        if self._worker is not None:
            await self._worker
            self._worker = None
        await asyncio.to_thread(self._finish_all)

    def writable(self) -> bool:
        """Blocking; call from a thread."""
        return self.directory.is_dir() and os.access(self.directory, os.W_OK)

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
            batch, self._pending = self._pending, []
            try:
                await asyncio.to_thread(self._commit, batch)
            except OSError as exc:
                log.error("archive %s: write failed: %s", self.directory, exc)
                # Start over with fresh files rather than append after a torn write.
                await asyncio.to_thread(self._abandon_all)
                error = DeliveryError(str(self.directory), f"write failed: {exc}", retriable=True)
                for item in batch:
                    if not item.done.done():
                        item.done.set_exception(error)
                continue
            for item in batch:
                if not item.done.done():
                    item.done.set_result(None)

    # -- blocking part, on a worker thread ----------------------------------------------

    def _prepare_directory(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for leftover in self.directory.glob(f"dt=*/namespace=*/_*{IN_PROGRESS_SUFFIX}"):
            self._recover(leftover)

    def _recover(self, path: Path) -> None:
        """Finalise an in-progress file whose writer is gone (nobody holds its lock)."""
        try:
            with path.open("rb") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return  # another live writer owns it
                if path.stat().st_size == 0:
                    path.unlink()
                    return
                final = path.with_name(path.name[1 : -len(IN_PROGRESS_SUFFIX)])
                os.rename(path, final)
                _fsync_directory(path.parent)
                log.warning("archive: finalised %s left in progress by a stopped writer", final)
        except FileNotFoundError:
            return  # another writer recovered it first

    def _commit(self, batch: list[_Pending]) -> None:
        now = self._clock()
        by_partition: dict[str, list[bytes]] = {}
        for item in batch:
            by_partition.setdefault(item.partition, []).append(item.line)
        touched: list[_OpenFile] = []
        for partition, lines in by_partition.items():
            current = self._open.get(partition)
            if current is not None and self._due(current, now):
                self._finish(partition)
                current = None
            if current is None:
                current = self._open_file(partition, now)
            data = b"".join(lines)
            if self.gzip:
                data = _gzip_member(data)
            current.handle.write(data)
            current.size += len(data)
            touched.append(current)
        for current in touched:
            current.handle.flush()
            os.fsync(current.handle.fileno())
            current.synced = current.size
        for partition in [p for p, f in self._open.items() if self._due(f, now)]:
            self._finish(partition)
        while len(self._open) > self.max_open_files:
            oldest = min(self._open, key=lambda p: self._open[p].opened_at)
            self._finish(oldest)

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
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        suffix = ".jsonl.gz" if self.gzip else ".jsonl"
        name = f"{self.file_prefix}-{stamp}-{self._tag}-{self._sequence:04d}-{uuid.uuid4().hex[:8]}"
        final = folder / f"{name}{suffix}"
        path = folder / f"_{name}{suffix}{IN_PROGRESS_SUFFIX}"
        handle = path.open("xb")
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # The new name must survive a crash too, or fsynced lines could be lost with it.
        _fsync_directory(folder)
        if new_folder:
            _fsync_directory(folder.parent)
            _fsync_directory(folder.parent.parent)
        opened = _OpenFile(path=path, final_path=final, handle=handle, opened_at=now)
        self._open[partition] = opened
        return opened

    def _finish(self, partition: str) -> Path:
        current = self._open.pop(partition)
        current.handle.flush()
        os.fsync(current.handle.fileno())
        os.rename(current.path, current.final_path)
        _fsync_directory(current.final_path.parent)
        current.handle.close()  # releases the lock only after the rename
        return current.final_path

    def _abandon_all(self) -> None:
        """After a failed commit: cut every file back to what was fsynced before it (the
        failed events were refused, and a torn line must not reach a reader), then finish."""
        for partition in list(self._open):
            current = self._open[partition]
            try:
                if current.synced == 0:  # nothing of it ever reached the disk
                    self._open.pop(partition)
                    current.path.unlink()
                    current.handle.close()
                    continue
                current.handle.truncate(current.synced)
                current.size = current.synced
                self._finish(partition)
            except OSError as exc:
                log.error("archive: could not finish %s: %s", partition, exc)
                self._open.pop(partition, None)
                current.handle.close()

    def _finish_all(self) -> list[Path]:
        return [self._finish(partition) for partition in list(self._open)]


def _gzip_member(data: bytes) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: gzip header and trailer
    return compressor.compress(data) + compressor.flush()


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ArchiveDestination:
    """The archive as a proxy destination: durable, so the client's 2xx waits for fsync."""

    durable = True

    def __init__(self, name: str, writer: ArchiveWriter) -> None:
        self.name = name
        self.writer = writer

    async def start(self) -> None:
        await self.writer.start()

    async def deliver(self, event: dict[str, Any], payload: bytes) -> None:
        try:
            await self.writer.write(event, payload)
        except DeliveryError as exc:
            raise DeliveryError(self.name, exc.reason, retriable=exc.retriable) from exc

    async def ready(self) -> bool:
        return await asyncio.to_thread(self.writer.writable)

    async def close(self) -> None:
        await self.writer.close()


def finished_files(directory: Path) -> Iterable[Path]:
    """Every finished archive file under ``directory`` (what a reader should read)."""
    return sorted(p for p in directory.glob("dt=*/namespace=*/*") if is_finished_file(p))


class ArchiveDestinationConfig(BaseModel):
    """An ``archive`` destination in a rules file (or a consumer's ``archive`` target)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["archive"]
    # Relative: under routing.archive_root of config.yaml.
    directory: Path
    gzip: bool = False
    max_file_bytes: Annotated[int, Field(gt=0)] = 128 * MiB
    max_file_age_seconds: Annotated[float, Field(gt=0)] = 300.0
    max_open_files: Annotated[int, Field(gt=0)] = 64


def archive_destination(
    name: str, config: ArchiveDestinationConfig, root: Path
) -> ArchiveDestination:
    """An (unstarted) archive destination; a relative directory is placed under ``root``.
    Also used by the consumer daemons' ``archive`` target."""
    directory = config.directory
    if not directory.is_absolute():
        directory = root / directory
    writer = ArchiveWriter(
        directory,
        gzip=config.gzip,
        max_file_bytes=config.max_file_bytes,
        max_file_age_seconds=config.max_file_age_seconds,
        max_open_files=config.max_open_files,
    )
    return ArchiveDestination(name, writer)
