"""Figures every fault test reports (sent, acknowledged, found, duplicates, seconds…).

Each call to :func:`report` prints one JSON line and keeps the record, and the suite's
``pytest_terminal_summary`` (tests/conftest.py) prints them all in a "fault figures"
section, so CI output shows them even when the tests pass and pytest captured stdout.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["RECORDED", "report"]

RECORDED: list[dict[str, Any]] = []


def report(test: str, **figures: Any) -> dict[str, Any]:
    """Record and print ``figures`` for ``test``; returns the record."""
    record = {"test": test, **figures}
    RECORDED.append(record)
    print(json.dumps(record, default=str))
    return record
