"""Which spool directories a proxy process writes, and which orphaned ones it drains,
for a single process and for the workers of ``serve --workers N`` (real directories)."""

from __future__ import annotations

from pathlib import Path

from proxy.destinations.kafka.spool_drainer import SpoolRoots, spool_roots


def _left_by_earlier_runs(root: Path) -> None:
    for name in ("worker-0", "worker-1", "worker-2", "worker-3", "kafka_9092"):
        (root / name).mkdir(parents=True)
    (root / "worker-notes").mkdir()  # not a worker's directory


def test_single_process_spools_in_the_directory_and_drains_every_worker_spool(tmp_path: Path):
    _left_by_earlier_runs(tmp_path)
    assert spool_roots(tmp_path) == SpoolRoots(
        tmp_path, tuple(tmp_path / f"worker-{i}" for i in range(4))
    )


def test_worker_0_drains_the_single_process_spool_and_those_of_workers_beyond_the_count(
    tmp_path: Path,
):
    _left_by_earlier_runs(tmp_path)
    assert spool_roots(tmp_path, worker=0, workers=2) == SpoolRoots(
        tmp_path / "worker-0", (tmp_path, tmp_path / "worker-2", tmp_path / "worker-3")
    )


def test_other_workers_only_spool_in_their_own_directory(tmp_path: Path):
    _left_by_earlier_runs(tmp_path)
    assert spool_roots(tmp_path, worker=1, workers=2) == SpoolRoots(tmp_path / "worker-1")


def test_a_directory_that_does_not_exist_yet_has_no_orphans(tmp_path: Path):
    assert spool_roots(tmp_path / "spool", worker=0, workers=4) == SpoolRoots(
        tmp_path / "spool" / "worker-0", (tmp_path / "spool",)
    )
