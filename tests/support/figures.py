"""Figures every fault test reports (sent, acknowledged, found, duplicates, seconds…).

Each call to :func:`report` prints one JSON line and appends it to a file of this worker
in the run's figures directory; the suite's ``pytest_terminal_summary`` (tests/conftest.py)
prints every worker's lines in a "fault figures" section, so CI output shows them even
when the tests pass, pytest captured stdout and the tests ran in pytest-xdist workers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.support.workers import worker_name

__all__ = ["FIGURES_DIRECTORY", "recorded", "report"]

# Set by the controlling pytest process (tests/conftest.py) before any worker starts,
# inherited by the workers through their environment.
FIGURES_DIRECTORY = "LINEAGE_PROXY_TEST_FIGURES"


def report(test: str, **figures: Any) -> dict[str, Any]:
    """Record and print ``figures`` for ``test``; returns the record."""
    record = {"test": test, **figures}
    line = json.dumps(record, default=str)
    print(line)
    directory = os.environ.get(FIGURES_DIRECTORY)
    if directory:
        with (Path(directory) / f"{worker_name()}.jsonl").open("a") as file:
            file.write(line + "\n")
    return record


def recorded(directory: Path) -> list[str]:
    """Every figures line the workers wrote to ``directory``, worker by worker."""
    return [
        line
        for path in sorted(directory.glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line
    ]
