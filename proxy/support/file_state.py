"""What tells that a file changed, for hot reload by polling (the rules file, TLS files).

mtime, size and inode together: an editor's rename-over, a config tool's rewrite and a
Kubernetes Secret volume's symlink swap all change at least one of them.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["FileState", "file_state"]

FileState = tuple[int, int, int]


def file_state(path: Path) -> FileState | None:
    """The file's (mtime in ns, size, inode), following symlinks; None if it cannot be read."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)
