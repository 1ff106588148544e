"""Which pytest-xdist worker this process is, so that each worker gets its own ports,
broker and directories. Without xdist the one process is worker 0 of 1."""

from __future__ import annotations

import os

__all__ = ["worker_count", "worker_index", "worker_name"]


def worker_name() -> str:
    """``gw0``, ``gw1``… under xdist (its PYTEST_XDIST_WORKER), ``main`` without."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def worker_index() -> int:
    """0-based index of this worker (0 without xdist)."""
    name = worker_name()
    return int(name[2:]) if name.startswith("gw") else 0


def worker_count() -> int:
    """How many workers run the suite (1 without xdist)."""
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
