"""Tell RunEvent, JobEvent and DatasetEvent apart.

The spec gives the three kinds no discriminator field; they are told apart by shape (the
spec's three schemas differ in their required fields): a ``run`` makes a RunEvent, else
a ``job`` a JobEvent, else a ``dataset`` a DatasetEvent.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

__all__ = ["EventKind", "event_kind"]


class EventKind(StrEnum):
    RUN = "run"
    JOB = "job"
    DATASET = "dataset"


def event_kind(event: dict[str, Any]) -> EventKind | None:
    """Return the event's kind, or None when it has none of ``run``, ``job``, ``dataset``."""
    if "run" in event:
        return EventKind.RUN
    if "job" in event:
        return EventKind.JOB
    if "dataset" in event:
        return EventKind.DATASET
    return None
