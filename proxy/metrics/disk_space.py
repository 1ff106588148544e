"""``lineage_proxy_disk_{available,size}_bytes{directory}``: the room left on the file
systems the proxy writes to — its spool and its archive root.

The spool's own limit (``kafka.spool.max_bytes``, alert LineageProxySpoolFillingUp) says
nothing about the disk under it: an archive destination of the rules writes onto the
same volume and keeps every file, and a full file system refuses the spool's and the
archive's writes alike — every POST is answered 503, whether Kafka is up or not. So the
proxy reports the file systems themselves (``statvfs``), which alert
LineageProxyDiskFillingUp watches. One series per file system, labelled by what the
first configured directory on it is (``spool`` before ``archive``: never an absolute
path); a directory not created yet is measured at its nearest existing parent. The disk
is read off the event loop every few seconds (a stalled disk must not stall the proxy),
and a scrape reports the last reading.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator, Mapping
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
    """Available and total bytes of the file system of each of ``directories`` (name →
    path, in order of precedence), as :meth:`watch` last read them."""

    def __init__(self, directories: Mapping[str, Path]) -> None:
        self._directories = dict(directories)
        # (name, available bytes, size in bytes) per file system.
        self.readings: list[tuple[str, int, int]] = []

    def read(self) -> list[tuple[str, int, int]]:
        """Read every file system now (blocking: call from a thread)."""
        readings = []
        seen: set[int] = set()
        for name, path in self._directories.items():
            existing = file_system_of(path.absolute())
            if existing is None:
                continue
            try:
                device = existing.stat().st_dev
                stats = os.statvfs(existing)
            except OSError:
                continue
            if device not in seen:
                seen.add(device)
                readings.append(
                    (name, stats.f_bavail * stats.f_frsize, stats.f_blocks * stats.f_frsize)
                )
        return readings

    async def watch(self, interval: float = 15.0) -> None:
        """Re-read the file systems every ``interval`` seconds, off the event loop."""
        while True:
            self.readings = await asyncio.to_thread(self.read)
            await asyncio.sleep(interval)

    def collect(self) -> Iterator[Metric]:
        available = GaugeMetricFamily(
            "lineage_proxy_disk_available_bytes",
            "Bytes an unprivileged writer may still write on the file system of the spool "
            "or the archive (statvfs f_bavail); at 0 every spool and archive write fails.",
            labels=["directory"],
        )
        size = GaugeMetricFamily(
            "lineage_proxy_disk_size_bytes",
            "Size of that file system (statvfs f_blocks).",
            labels=["directory"],
        )
        for name, free, total in self.readings:
            available.add_metric([name], free)
            size.add_metric([name], total)
        yield available
        yield size
