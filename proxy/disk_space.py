"""``lineage_proxy_disk_{available,size}_bytes{path}``: the room left on the file systems
the proxy writes to — its spool and its archive root.

The spool's own limit (``kafka.spool.max_bytes``, alert LineageProxySpoolFillingUp) says
nothing about the disk under it: an archive destination of the rules writes onto the
same volume and keeps every file, and a full file system refuses the spool's and the
archive's writes alike — every POST is answered 503, whether Kafka is up or not. So the
proxy reports the file systems themselves (``statvfs``, read on scrape), which alert
LineageProxyDiskFillingUp watches. One series per file system, labelled with the first
configured path on it (the spool before the archive); a directory not created yet is
measured at its nearest existing parent.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["DiskSpace", "file_system_of"]


def file_system_of(path: Path) -> Path | None:
    """``path`` or its nearest existing parent (what a write under it would land on)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return None


class DiskSpace(Collector):
    """Available and total bytes of each file system under ``paths()`` (read on scrape:
    the paths may change with the config)."""

    def __init__(self, paths: Callable[[], Iterable[Path]]) -> None:
        self._paths = paths

    def collect(self) -> Iterator[Metric]:
        available = GaugeMetricFamily(
            "lineage_proxy_disk_available_bytes",
            "Bytes an unprivileged writer may still write on the file system of the spool "
            "or the archive (statvfs f_bavail); at 0 every spool and archive write fails.",
            labels=["path"],
        )
        size = GaugeMetricFamily(
            "lineage_proxy_disk_size_bytes",
            "Size of that file system (statvfs f_blocks).",
            labels=["path"],
        )
        seen: set[int] = set()
        for path in self._paths():
            existing = file_system_of(path.absolute())
            if existing is None:
                continue
            try:
                device = existing.stat().st_dev
                stats = os.statvfs(existing)
            except OSError:
                continue
            if device in seen:
                continue
            seen.add(device)
            available.add_metric([str(path)], stats.f_bavail * stats.f_frsize)
            size.add_metric([str(path)], stats.f_blocks * stats.f_frsize)
        yield available
        yield size
