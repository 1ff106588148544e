"""Events the transport could not deliver, kept on local disk until it can.

When the proxy is down for longer than the transport's retries (about 9 s with the http
transport's defaults), the event would be lost. :class:`DiskBuffer` keeps it instead, in a
file of JSON lines that belongs to one emitter (one Spark application): appended in the
order the events were produced, sent back oldest first. Once one event is buffered, every
later event of the application is appended behind it rather than sent around it, so a
run's events reach the proxy in the order they happened.

A file left behind by an application that ended with events undelivered is sent by the
next emitter that opens a buffer on the same directory (the next job's start), or by
``python -m spark_emitter.buffer send``. Each file is locked (``flock``) by whoever sends
from it, so two jobs starting together do not both send it; a live application's own file
is locked by it and left alone.

How far a file was delivered is kept beside it (``<file>.sent``, a byte offset), so an
application that stops halfway through sending resumes where it left off; an event whose
delivery was in flight at that moment may be sent twice — duplicates are harmless to the
proxy and to OpenLineage consumers, a lost event is not.

The directory is bounded (``max_bytes``, all files together, counted when the buffer
opens and as it grows): an event that would go past it is dropped and counted, never
blocking the job. The buffer writes without fsync: it survives the proxy being down and
the application ending, not the machine crashing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["DiskBuffer", "default_buffer_directory", "locked_files"]

log = logging.getLogger(__name__)

_SUFFIX = ".jsonl"
_SENT = ".sent"


def default_buffer_directory() -> Path:
    """``$XDG_CACHE_HOME/spark_emitter/buffer`` (``~/.cache/...`` without it)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "spark_emitter" / "buffer"


@dataclass
class _File:
    """One buffer file, locked by us, and how far it was delivered."""

    path: Path
    handle: BinaryIO
    offset: int

    @property
    def sent_path(self) -> Path:
        return self.path.with_name(self.path.name + _SENT)

    def next_line(self) -> bytes | None:
        self.handle.seek(self.offset)
        line = self.handle.readline()
        return line if line.endswith(b"\n") else None  # a torn last line is not an event

    def mark_sent(self, length: int) -> None:
        self.offset += length
        self.sent_path.write_text(str(self.offset))

    def waiting(self) -> int:
        """How many events wait in this file: whole lines past the delivered offset."""
        self.handle.seek(self.offset)
        return sum(1 for line in self.handle if line.endswith(b"\n"))

    def remove(self) -> None:
        self.handle.close()
        self.path.unlink(missing_ok=True)
        self.sent_path.unlink(missing_ok=True)


def _open_locked(path: Path, create: bool) -> _File | None:
    """``path`` opened and locked, or None when another process holds it."""
    try:
        handle = open(path, "a+b" if create else "r+b")  # noqa: SIM115 (kept open)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    sent = path.with_name(path.name + _SENT)
    try:
        offset = int(sent.read_text() or 0)
    except (FileNotFoundError, ValueError):
        offset = 0
    return _File(path, handle, offset)


def locked_files(directory: Path, skip: Path | None = None) -> Iterator[_File]:
    """The buffer files of ``directory`` nobody else holds, oldest first (names start
    with a time-ordered UUIDv7), each locked until the caller removes or closes it."""
    if not directory.is_dir():
        return
    for path in sorted(directory.glob("*" + _SUFFIX)):
        if path != skip and (opened := _open_locked(path, create=False)) is not None:
            yield opened


class DiskBuffer:
    """The undelivered events of one emitter, plus those earlier applications left."""

    def __init__(self, directory: Path, owner: str, max_bytes: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.max_bytes = max_bytes
        self.dropped = 0
        own = _open_locked(directory / f"{owner}{_SUFFIX}", create=True)
        if own is None:
            raise RuntimeError(f"{directory / owner}{_SUFFIX} is locked by another process")
        self._own = own
        self._earlier = list(locked_files(directory, skip=own.path))
        self._bytes = sum(p.stat().st_size for p in directory.glob("*" + _SUFFIX))
        if self._earlier:
            log.info(
                "openlineage: %d buffer file(s) of earlier applications in %s to send",
                len(self._earlier),
                directory,
            )

    def pending(self) -> bool:
        """Whether any buffered event waits: later events must queue behind it."""
        return bool(self._earlier) or self._own.offset < self._own.handle.seek(0, os.SEEK_END)

    def waiting(self) -> dict[Path, int]:
        """How many events wait, per file that has any (earlier applications' first):
        what an application says it leaves behind is counted on disk, not guessed."""
        counts = {file.path: file.waiting() for file in [*self._earlier, self._own]}
        return {path: count for path, count in counts.items() if count}

    def append(self, event: dict[str, Any]) -> bool:
        """Add ``event`` behind the others; False (and counted) when it does not fit."""
        line = json.dumps(event, separators=(",", ":")).encode() + b"\n"
        if self._bytes + len(line) > self.max_bytes:
            self.dropped += 1
            log.warning(
                "openlineage: buffer %s is full (%d bytes), event dropped (%d so far)",
                self.directory,
                self.max_bytes,
                self.dropped,
            )
            return False
        self._own.handle.seek(0, os.SEEK_END)
        self._own.handle.write(line)
        self._own.handle.flush()
        self._bytes += len(line)
        return True

    def oldest(self) -> dict[str, Any] | None:
        """The next event to send, or None when nothing waits."""
        while self._earlier:
            line = self._earlier[0].next_line()
            if line is not None:
                return dict(json.loads(line))
            self._bytes -= self._earlier[0].path.stat().st_size
            self._earlier.pop(0).remove()
        line = self._own.next_line()
        return None if line is None else dict(json.loads(line))

    def delivered(self) -> None:
        """The event :meth:`oldest` gave was delivered: move past it."""
        current = self._earlier[0] if self._earlier else self._own
        line = current.next_line()
        if line is not None:
            current.mark_sent(len(line))

    def close(self) -> None:
        """Release the files; our own is removed when everything in it was delivered,
        else left (unlocked) for the next application or ``spark_emitter.buffer send``."""
        for earlier in self._earlier:
            earlier.handle.close()
        self._earlier = []
        if self._own.offset >= self._own.handle.seek(0, os.SEEK_END):
            self._own.remove()
        else:
            self._own.handle.close()


def _send_all(directory: Path) -> int:
    """Send every unlocked buffer file of ``directory`` through the client openlineage-
    python configures from the environment; the number of events sent. Stops at the
    first failure, leaving the rest for later."""
    from spark_emitter.delivery import client_event, open_client

    client = open_client(None)
    if client is None:
        raise SystemExit("spark_emitter.buffer: no transport configured (set OPENLINEAGE_URL)")
    sent = 0
    for file in locked_files(directory):
        while (line := file.next_line()) is not None:
            client.emit(client_event(json.loads(line)))
            file.mark_sent(len(line))
            sent += 1
        file.remove()
    return sent


def main(argv: list[str] | None = None) -> int:
    """``python -m spark_emitter.buffer send [DIRECTORY]``: send what applications left in
    the buffer (default: ``OPENLINEAGE_SPARK_BUFFER_DIR`` or the default directory)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m spark_emitter.buffer")
    parser.add_argument("command", choices=["send"])
    parser.add_argument("directory", nargs="?", type=Path)
    args = parser.parse_args(argv)
    directory = args.directory or Path(
        os.environ.get("OPENLINEAGE_SPARK_BUFFER_DIR") or default_buffer_directory()
    )
    with contextlib.suppress(KeyboardInterrupt):
        print(f"{_send_all(directory)} event(s) sent from {directory}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
