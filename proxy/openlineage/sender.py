"""Who sent an event, as far as the event itself says: for log lines and the status
page about refused or repaired events, which must name the sender, never the payload."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proxy.openlineage.names import subject_name

__all__ = ["Sender"]

# How much of a producer URI or job name is kept (they are the client's strings).
_NAME_CHARS = 200


@dataclass(frozen=True, slots=True)
class Sender:
    """Who sent a refused event, as far as the event says: ``producer`` and the job's
    (a dataset event: the dataset's) ``namespace/name``."""

    producer: str | None = None
    job: str | None = None

    @classmethod
    def of(cls, event: Any) -> Sender:
        if not isinstance(event, dict):
            return cls()
        producer = event.get("producer")
        subject = subject_name(event)
        return cls(
            producer[:_NAME_CHARS] if isinstance(producer, str) else None,
            f"{subject[0]}/{subject[1]}"[:_NAME_CHARS] if subject else None,
        )

    def described(self) -> str:
        """`` (producer P, job N/J)`` for a log line; empty when nothing is known."""
        parts = [f"producer {self.producer}"] if self.producer else []
        parts += [f"job {self.job}"] if self.job else []
        return f" ({', '.join(parts)})" if parts else ""
