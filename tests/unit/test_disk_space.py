"""The disk gauges alert LineageProxyDiskFillingUp reads (proxy/metrics/disk_space.py): the
spool's and the archive's file systems as statvfs sees them, once per file system, even
before the directories exist, named by role — never by an absolute path."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from prometheus_client import CollectorRegistry

from proxy.metrics.disk_space import DiskSpace, file_system_of
from tests.support.waiting import wait_for


def _samples(collector: DiskSpace) -> dict[tuple[str, str], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    return {
        (sample.name, sample.labels["directory"]): sample.value
        for family in registry.collect()
        for sample in family.samples
    }


async def test_available_and_size_are_the_file_systems_as_statvfs_reports_them(tmp_path: Path):
    """Seen failing before the gauges existed (no module: no disk in /metrics at all)."""
    spool = tmp_path / "spool"
    spool.mkdir()
    disks = DiskSpace({"spool": spool})
    assert _samples(disks) == {}  # nothing read yet
    watch = asyncio.create_task(disks.watch(interval=0.05))
    try:
        await wait_for(lambda: bool(disks.readings), 10, "a reading")
    finally:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
    samples = _samples(disks)
    stats = os.statvfs(spool)
    size = samples[("lineage_proxy_disk_size_bytes", "spool")]
    assert size == stats.f_blocks * stats.f_frsize > 0
    available = samples[("lineage_proxy_disk_available_bytes", "spool")]
    # Others may write meanwhile: the same order of magnitude, never above the size.
    assert 0 <= available <= size
    assert abs(available - stats.f_bavail * stats.f_frsize) < size / 100


def test_one_series_per_file_system_named_by_the_first_directory(tmp_path: Path):
    """The spool and the archive on one volume (the chart's layout) are one file system:
    one series, named spool; a directory not created yet counts where it would be."""
    spool, archive = tmp_path / "spool", tmp_path / "archive" / "not" / "yet"
    spool.mkdir()
    assert file_system_of(archive) == tmp_path
    disks = DiskSpace({"spool": spool, "archive": archive})
    disks.readings = disks.read()
    assert {name for _, name in _samples(disks)} == {"spool"}
    assert len(_samples(disks)) == 2
    alone = DiskSpace({"archive": archive})
    alone.readings = alone.read()
    assert {name for _, name in _samples(alone)} == {"archive"}
