"""The disk gauges alert LineageProxyDiskFillingUp reads (proxy/disk_space.py): the
spool's and the archive's file systems as statvfs sees them, once per file system, even
before the directories exist."""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client import CollectorRegistry

from proxy.disk_space import DiskSpace, file_system_of


def _samples(collector: DiskSpace) -> dict[tuple[str, str], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    return {
        (sample.name, sample.labels["path"]): sample.value
        for family in registry.collect()
        for sample in family.samples
    }


def test_available_and_size_are_the_file_systems_as_statvfs_reports_them(tmp_path: Path):
    spool = tmp_path / "spool"
    spool.mkdir()
    samples = _samples(DiskSpace(lambda: [spool]))
    stats = os.statvfs(spool)
    size = samples[("lineage_proxy_disk_size_bytes", str(spool))]
    assert size == stats.f_blocks * stats.f_frsize > 0
    available = samples[("lineage_proxy_disk_available_bytes", str(spool))]
    # Others may write meanwhile: the same order of magnitude, never above the size.
    assert 0 <= available <= size
    assert abs(available - stats.f_bavail * stats.f_frsize) < size / 100


def test_one_series_per_file_system_named_by_the_first_path(tmp_path: Path):
    """The spool and the archive on one volume (the chart's layout) are one file system:
    one series, named by the spool; a directory not created yet counts where it would be."""
    spool, archive = tmp_path / "spool", tmp_path / "archive" / "not" / "yet"
    spool.mkdir()
    assert file_system_of(archive) == tmp_path
    samples = _samples(DiskSpace(lambda: [spool, archive]))
    assert {path for _, path in samples} == {str(spool)}
    assert len(samples) == 2
