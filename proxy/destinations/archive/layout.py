"""Where an event lands in the archive, and which files a reader reads.

The naming half of the archive (:mod:`proxy.destinations.archive.destination` writes the files):
pure functions that never raise, whatever the event holds, because a partition name
that cannot be built or cannot be created on disk would refuse the event on every retry.

- ``dt=YYYY-MM-DD`` is the UTC date of ``eventTime``. An offset that moves the instant
  past the calendar's ends (``0001-01-01T00:00:00+01:00`` is still in year 0 in UTC,
  ``9999-12-31T23:59:59-01:00`` already in year 10000) is clamped to ``0001-01-01`` or
  ``9999-12-31``; a time that cannot be parsed or has no offset files under the day it
  arrived (UTC).
- ``namespace=<value>`` is the job namespace (a DatasetEvent's dataset namespace),
  escaped as Hive and Spark escape partition values (``%`` + two hex digits for
  ``"#%'*/:=?\\{[]^``, control characters and DEL), so Spark's partition discovery
  gives back the original string. An empty namespace is ``__HIVE_DEFAULT_PARTITION__``.
- File names have a 255-byte limit on common file systems, so an escaped value longer
  than :data:`MAX_PARTITION_VALUE_BYTES` (UTF-8) is **shortened**: cut to at most that
  many bytes (never inside a character or a ``%XX`` escape), then ``~`` and the first
  16 hex digits of the SHA-256 of the full namespace (UTF-8). A shortened value is
  always longer than any value kept whole, so two namespaces never share a directory.
  The full namespace is never lost: it is in every event of the directory
  (``job.namespace``, or ``dataset.namespace`` for a DatasetEvent) — readers that need
  it take it from there, and :func:`escape_partition_value` gives the directory of a
  namespace.
"""

from __future__ import annotations

import functools
import hashlib
import time
import uuid
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from proxy.openlineage import subject_name
from proxy.openlineage.rejected import rejected_event

__all__ = [
    "DEFAULT_PARTITION",
    "IN_PROGRESS_SUFFIX",
    "MAX_PARTITION_VALUE_BYTES",
    "archive_directory",
    "archive_file_name",
    "escape_partition_value",
    "event_date",
    "event_partition",
    "finished_files",
    "finished_name",
    "in_progress_files",
    "is_finished_file",
]

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
IN_PROGRESS_SUFFIX = ".inprogress"
# With "namespace=" (10 bytes) and a shortened value's "~" + 16 hex digits, a directory
# name stays at most 227 bytes: under the 255-byte limit of ext4, XFS, btrfs, tmpfs...
MAX_PARTITION_VALUE_BYTES = 200
_DIGEST_HEX = 16

# Characters Hive/Spark escape in partition values (ExternalCatalogUtils.charToEscape).
_ESCAPED = frozenset("\"#%'*/:=?\\{[]^\x7f") | frozenset(chr(c) for c in range(0, 0x20))


def _escape_char(char: str) -> str:
    if char in _ESCAPED:
        return f"%{ord(char):02X}"
    if "\ud800" <= char <= "\udfff":  # a lone surrogate (valid JSON cannot carry one)
        return "\ufffd"
    return char


@functools.lru_cache(maxsize=4096)
def escape_partition_value(value: str) -> str:
    """The directory value of ``value`` (after ``namespace=``): escaped as Hive/Spark do,
    shortened with a digest when too long for a file name (see the module docstring)."""
    if not value:
        return DEFAULT_PARTITION
    units = [_escape_char(c) for c in value]
    escaped = "".join(units)
    lossy = not escaped.isascii() and any("\ud800" <= c <= "\udfff" for c in value)
    if not lossy and len(escaped.encode()) <= MAX_PARTITION_VALUE_BYTES:
        return escaped
    kept: list[str] = []
    size = 0
    for unit in units:
        size += len(unit.encode())
        if size > MAX_PARTITION_VALUE_BYTES:
            break
        kept.append(unit)
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return "".join(kept) + "~" + digest[:_DIGEST_HEX]


def _parsed_utc_date(text: str) -> date | None:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    offset = parsed.utcoffset()
    if offset is None:
        return None
    try:
        return (parsed.replace(tzinfo=None) - offset).date()
    except OverflowError:
        # The UTC instant lies before year 1 or after year 9999: clamp to the edge.
        return date.min if offset > timedelta(0) else date.max


def event_date(event: dict[str, Any]) -> str:
    """``YYYY-MM-DD``, the UTC date of ``eventTime`` (see the module docstring)."""
    event_time = event.get("eventTime")
    if isinstance(event_time, str):
        day: date | None = None
        # The common case, already UTC: only the date part needs reading.
        if event_time.endswith(("Z", "z", "+00:00")):
            try:
                day = date.fromisoformat(event_time[:10])
            except ValueError:
                day = None
        if day is None:
            day = _parsed_utc_date(event_time)
        if day is not None:
            return day.isoformat()
    return datetime.now(UTC).date().isoformat()


def event_partition(event: dict[str, Any]) -> str:
    """``dt=YYYY-MM-DD/namespace=<value>`` for an event (a relative directory). A
    refused event's envelope goes under the namespace of the event inside, when it has
    one, so refusals are found (and replayed) with the job's other events."""
    subject = subject_name(event)
    if subject is None and isinstance(refused := rejected_event(event), dict):
        subject = subject_name(refused)
    namespace = subject[0] if subject else ""
    return f"dt={event_date(event)}/namespace={escape_partition_value(namespace)}"


def archive_file_name(file_prefix: str, tag: str, sequence: int, *, gzip: bool) -> str:
    """A new file's final name: ``<file_prefix>-<UTC time>-<tag>-<sequence>-<random>``
    and ``.jsonl`` or ``.jsonl.gz``. ``tag`` tells writers apart (pid, host); the random
    part keeps names unique across restarts. Local files and objects share it."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    suffix = ".jsonl.gz" if gzip else ".jsonl"
    return f"{file_prefix}-{stamp}-{tag}-{sequence:04d}-{uuid.uuid4().hex[:8]}{suffix}"


def archive_directory(directory: Path, root: Path) -> Path:
    """An archive destination's directory: a relative one is placed under ``root``
    (``routing.archive_root``)."""
    return directory if directory.is_absolute() else root / directory


def is_finished_file(path: Path) -> bool:
    """Whether a reader should read ``path`` (not in progress, not hidden)."""
    return not path.name.startswith(("_", "."))


def finished_files(directory: Path) -> Iterable[Path]:
    """Every finished archive file under ``directory`` (what a reader should read)."""
    return sorted(p for p in directory.glob("dt=*/namespace=*/*") if is_finished_file(p))


def in_progress_files(directory: Path) -> Iterable[Path]:
    """Every file still being written under ``directory`` (``_*.inprogress``): its
    fsynced whole lines are events the archive acknowledged, a reader that wants the
    latest ones reads them too (up to the last newline)."""
    return sorted(directory.glob(f"dt=*/namespace=*/_*{IN_PROGRESS_SUFFIX}"))


def finished_name(path: Path) -> Path:
    """The name an in-progress file gets when it is finished (renamed at rotation)."""
    return path.with_name(path.name[1 : -len(IN_PROGRESS_SUFFIX)])
