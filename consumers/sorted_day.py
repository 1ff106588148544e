"""One archive day's events in event-time order, in bounded memory: an external merge sort.

``replay`` sends a day's events oldest first, but the archive's files hold them in the
order they arrived (one file per partition per rotation, clients' clocks interleaved),
so a day must be sorted. Holding it whole does not scale (200,000 events of ~2.8 KB,
plus their parsed dicts, is gigabytes); instead:

1. the day's files are read line by line (gzip streamed); each kept event becomes
   ``(event time in µs, payload bytes)`` — its parsed dict is dropped at once;
2. every ``run_bytes`` of payloads, the run is sorted and written to a temporary file
   (under ``$TMPDIR``);
3. the runs are merged with :func:`heapq.merge`, which holds one event per run.

Memory is one run plus one event per run, whatever the size of the day; a day smaller
than one run never touches the disk. The sort is stable: events with the same time come
out in the order they were read (file by file, line by line), as before.
"""

from __future__ import annotations

import gzip
import heapq
import struct
import tempfile
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import orjson

from proxy.destinations.archive.layout import IN_PROGRESS_SUFFIX, finished_name

__all__ = ["RUN_BYTES", "SortedDay", "sort_day"]

# Payload bytes sorted in memory before they are spilled as one run.
RUN_BYTES = 32 * 1024 * 1024

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
# A spilled record: event time (µs since the epoch, signed), payload length, payload.
_HEADER = struct.Struct(">qI")

# (event time in µs, payload)
_Keyed = tuple[int, bytes]
# What a read line becomes: None to skip it, else (event time, payload) to send.
LineReader = Callable[[bytes], tuple[datetime, bytes] | None]


class SortedDay:
    """The kept events of one day, sorted; iterate once with :meth:`events`, then close."""

    def __init__(self, count: int, runs: list[IO[bytes]], last: list[_Keyed]) -> None:
        self.count = count
        self._runs = runs
        self._last = last

    def events(self) -> Iterator[tuple[bytes, dict[str, Any]]]:
        """Blocking (reads the spilled runs): ``(payload, event)`` oldest first."""
        sources: list[Iterable[_Keyed]] = [_read_run(run) for run in self._runs]
        sources.append(self._last)  # read last, so it goes last among equal times
        for _, payload in heapq.merge(*sources, key=_time):
            yield payload, orjson.loads(payload)

    def close(self) -> None:
        for run in self._runs:
            run.close()  # temporary files: deleted on close
        self._runs, self._last = [], []


def sort_day(paths: Iterable[Path], read: LineReader, run_bytes: int | None = None) -> SortedDay:
    """Blocking: read ``paths`` (JSON Lines, plain or gzip) through ``read`` and sort
    what it keeps by event time, spilling a sorted run every ``run_bytes`` (default
    :data:`RUN_BYTES`)."""
    run_bytes = run_bytes or RUN_BYTES
    runs: list[IO[bytes]] = []
    pending: list[_Keyed] = []
    held = count = 0
    try:
        for path in paths:
            for line in _lines(path):
                kept = read(line.rstrip(b"\r\n"))
                if kept is None:
                    continue
                when, payload = kept
                pending.append(((when - _EPOCH) // _MICROSECOND, payload))
                held += len(payload)
                count += 1
                if held >= run_bytes:
                    runs.append(_spill(pending))
                    pending, held = [], 0
    except BaseException:
        for run in runs:
            run.close()
        raise
    pending.sort(key=_time)
    return SortedDay(count, runs, pending)


def _time(item: _Keyed) -> int:
    return item[0]


def _lines(path: Path) -> Iterator[bytes]:
    if path.name.endswith(IN_PROGRESS_SUFFIX):
        yield from _whole_lines(path)
    elif path.name.endswith(".gz"):
        # A series of gzip members (one per group commit): gzip reads on through them.
        with gzip.open(path, "rb") as compressed:
            yield from compressed
    else:
        with path.open("rb") as plain:
            yield from plain


def _whole_lines(path: Path) -> Iterator[bytes]:
    """The whole lines of a file still being written: a last line without its newline
    (or an incomplete gzip member) is being written now and left out. A file finished
    (renamed) since it was listed is read under its finished name."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        handle = finished_name(path).open("rb")
    with handle:
        stream: Iterable[bytes] = (
            gzip.GzipFile(fileobj=handle, mode="rb")
            if path.name.endswith(".gz" + IN_PROGRESS_SUFFIX)
            else handle
        )
        try:
            for line in stream:
                if line.endswith(b"\n"):
                    yield line
        except EOFError:  # the gzip member being written now
            return


def _spill(entries: list[_Keyed]) -> IO[bytes]:
    """Sort ``entries`` (stable) into a new temporary file, left open for the merge."""
    entries.sort(key=_time)
    # Left open on purpose: the merge reads it, SortedDay.close() closes (deletes) it.
    run = tempfile.TemporaryFile(prefix="lineage-proxy-replay-")  # noqa: SIM115
    try:
        for when, payload in entries:
            run.write(_HEADER.pack(when, len(payload)))
            run.write(payload)
        run.seek(0)
    except BaseException:
        run.close()
        raise
    return run


def _read_run(run: IO[bytes]) -> Iterator[_Keyed]:
    while header := run.read(_HEADER.size):
        when, length = _HEADER.unpack(header)
        yield when, run.read(length)
