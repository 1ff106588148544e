"""A real full disk for fault tests: a small tmpfs (needs root), filled and freed again.

Where mounting is not permitted, tests fall back to ``RLIMIT_FSIZE`` in a subprocess
(writes past the limit fail with EFBIG, like a full disk fails with ENOSPC); see
:func:`limit_file_size`. Nothing here fakes an error: the kernel refuses the writes.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["fill", "limit_file_size", "small_tmpfs"]


@contextlib.contextmanager
def small_tmpfs(size: str = "2m") -> Iterator[Path | None]:
    """A freshly mounted tmpfs of ``size``, unmounted afterwards; None when this process
    may not mount (not root, or no mount permission in a container)."""
    directory = Path(tempfile.mkdtemp(prefix="lineage-proxy-small-disk-"))
    mounted = False
    try:
        if os.geteuid() == 0:
            command = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)]
            mounted = subprocess.run(command, capture_output=True, check=False).returncode == 0
        yield directory if mounted else None
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)
        with contextlib.suppress(OSError):
            directory.rmdir()


def fill(directory: Path) -> Path:
    """Write a filler file in ``directory`` until the file system refuses (ENOSPC);
    delete the returned file to free the space again."""
    filler = directory / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for chunk in (b"\0" * 65536, b"\0" * 512, b"\0"):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, chunk)
    finally:
        os.close(fd)
    return filler


def limit_file_size(limit: int) -> None:
    """From now on this process cannot grow any file past ``limit`` bytes (EFBIG); use
    ``resource.RLIM_INFINITY`` to lift it. Only in a subprocess: it binds every file."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the default action kills the process
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
