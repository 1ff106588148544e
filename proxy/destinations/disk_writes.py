"""Unbuffered appends and a disk probe, shared by the archive and the spool.

Both write with plain ``os.write``/``os.pwrite`` so that nothing a failed write refused
stays in a userspace buffer to be written later, behind the writer's back; and both ask
"does a small write + fsync work now?" the same way when deciding readiness after a
failure.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

__all__ = ["disk_accepts", "fsync_directory", "write_all", "write_all_at"]


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` at the file's position (or its end, with ``O_APPEND``)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_all_at(fd: int, data: bytes, offset: int) -> None:
    """Write all of ``data`` at ``offset``: where a write lands does not depend on what
    an earlier, failed write left behind."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def disk_accepts(directory: Path, prefix: str, size: int) -> bool:
    """Whether ``size`` bytes can be written and fsynced in ``directory`` now (a probe
    file named ``prefix…``, removed again). Blocking: call from a thread."""
    path = directory / f"{prefix}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except OSError:
        return False
    try:
        write_all(fd, bytes(size))
        os.fsync(fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()


def fsync_directory(directory: Path) -> None:
    """Make the names created in (or removed from) ``directory`` survive a crash."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
