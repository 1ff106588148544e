"""One worker's share of the status page, and the whole proxy's from every share.

With ``serve --workers N`` each worker counts only what it handled. The worker that
takes ``GET /api/v1/status`` asks every sibling for its :class:`WorkerPart` over the
workers' private channel (:class:`proxy.metrics.workers.Siblings`) and merges them:
counters (and their growth over the window) summed, so latency quantiles come from the
summed histogram buckets; a destination's health is the worst any worker sees (spool
depths summed); refusals merged newest first. A worker that does not answer is listed
as down and left out of the figures.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proxy.web.readiness import Health
from proxy.web.rejections import Rejected
from proxy.web.status.rates import Reading

__all__ = ["MAX_REJECTIONS", "WorkerPart", "merged_health", "merged_readings", "newest_rejections"]

# As many refusals as one worker keeps: the page shows the newest of all workers'.
MAX_REJECTIONS = 50

_CIRCUIT_RANK = {"closed": 0, "half-open": 1, "open": 2}


@dataclass(frozen=True)
class WorkerPart:
    """What one worker knows: its registry now and its growth over ``seconds``, its view
    of each destination's health, its last refusals."""

    worker: int
    pid: int
    uptime_seconds: float
    now: Reading
    growth: Reading
    seconds: float
    health: dict[str, Health]
    rejections: list[Rejected]

    def as_json(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "pid": self.pid,
            "uptime_seconds": self.uptime_seconds,
            "now": _reading_json(self.now),
            "growth": _reading_json(self.growth),
            "seconds": self.seconds,
            "health": {
                name: [h.ready, h.circuit, h.details, h.problem] for name, h in self.health.items()
            },
            "rejections": [r.as_json() for r in self.rejections],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkerPart:
        return cls(
            worker=data["worker"],
            pid=data["pid"],
            uptime_seconds=data["uptime_seconds"],
            now=_reading(data["now"]),
            growth=_reading(data["growth"]),
            seconds=data["seconds"],
            health={name: Health(*state) for name, state in data["health"].items()},
            rejections=[
                Rejected(
                    **{
                        **r,
                        "pointers": tuple(r["pointers"]),
                        "messages": tuple(r.get("messages", ())),
                    }
                )
                for r in data["rejections"]
            ],
        )


def _reading_json(reading: Reading) -> dict[str, Any]:
    return {
        "at": reading.at,
        "values": [[name, labels, value] for (name, labels), value in reading.values.items()],
    }


def _reading(data: dict[str, Any]) -> Reading:
    return Reading(
        data["at"],
        {(name, tuple((k, v) for k, v in labels)): value for name, labels, value in data["values"]},
    )


def merged_readings(readings: Sequence[Reading]) -> Reading:
    """Every sample summed over ``readings`` (counters and gauges of N workers)."""
    values: dict[Any, float] = {}
    for reading in readings:
        for key, value in reading.values.items():
            values[key] = values.get(key, 0.0) + value
    return Reading(max((r.at for r in readings), default=0.0), values)


def merged_health(states: Sequence[Health]) -> Health:
    """The worst of the workers' views of one destination: not ready if any says so,
    the most open circuit, spool figures summed (ages: the oldest)."""
    circuits = [s.circuit for s in states if s.circuit is not None]
    details = [s.details for s in states if s.details is not None]
    return Health(
        ready=all(s.ready for s in states),
        circuit=max(circuits, key=lambda c: _CIRCUIT_RANK.get(c, 3)) if circuits else None,
        details=_merged_details(details) if details else None,
        problem=next((s.problem for s in states if s.problem), None),
    )


def _merged_details(notes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for key in dict.fromkeys(itertools.chain.from_iterable(notes)):
        values = [note[key] for note in notes if key in note]
        if all(isinstance(v, bool) for v in values):
            merged[key] = any(values)
        elif all(isinstance(v, int | float) for v in values):
            merged[key] = max(values) if key.endswith("age_seconds") else sum(values)
        else:
            merged[key] = next((v for v in values if v is not None), None)
    return merged


def newest_rejections(parts: Sequence[WorkerPart]) -> list[Rejected]:
    every = itertools.chain.from_iterable(p.rejections for p in parts)
    return sorted(every, key=lambda r: r.time, reverse=True)[:MAX_REJECTIONS]
