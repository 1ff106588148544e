"""Counters read from the Prometheus registry, sampled over a sliding window.

A :class:`Reading` is every sample of the registry at one moment, keyed by sample name
and labels. :class:`RateWindow` keeps readings a few seconds apart for the last
``window`` seconds, so that "per minute" is the difference between now and a reading
about a minute old. While the proxy has been up for less than the window, the
difference since start is shown as it is (events so far this minute), not extrapolated.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry

__all__ = ["RateWindow", "Reading", "read_registry"]

Labels = tuple[tuple[str, str], ...]


class Reading:
    """The registry's samples at one moment (``_created`` timestamps left out)."""

    def __init__(self, at: float, values: dict[tuple[str, Labels], float]) -> None:
        self.at = at
        self.values = values

    def samples(self, name: str) -> Iterator[tuple[dict[str, str], float]]:
        """``(labels, value)`` of every sample called ``name``, in registry order."""
        for (sample, labels), value in self.values.items():
            if sample == name:
                yield dict(labels), value

    def total(self, name: str, **match: str) -> float:
        """The sum of the samples called ``name`` whose labels include ``match``."""
        return sum(
            value
            for labels, value in self.samples(name)
            if all(labels.get(k) == v for k, v in match.items())
        )

    def since(self, older: Reading) -> Reading:
        """What every sample grew by since ``older`` (a counter's increase)."""
        return Reading(
            self.at - older.at,
            {key: value - older.values.get(key, 0.0) for key, value in self.values.items()},
        )


def read_registry(registry: CollectorRegistry, at: float | None = None) -> Reading:
    values: dict[tuple[str, Labels], float] = {}
    for family in registry.collect():
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return Reading(time.monotonic() if at is None else at, values)


class RateWindow:
    """Readings over the last ``window`` seconds, one every ``every`` seconds."""

    def __init__(self, registry: CollectorRegistry, window: float = 60.0, every: float = 5.0):
        self.registry = registry
        self.window = window
        self.every = every
        self._readings: collections.deque[Reading] = collections.deque()

    def sample(self, at: float | None = None) -> None:
        reading = read_registry(self.registry, at)
        self._readings.append(reading)
        # Keep one reading at least a window old as the baseline; drop older ones.
        horizon = reading.at - self.window
        while len(self._readings) > 1 and self._readings[1].at <= horizon:
            self._readings.popleft()

    def now_and_growth(self, at: float | None = None) -> tuple[Reading, Reading, float]:
        """The registry now, what it grew by over the window, and the seconds that
        growth is divided by for a per-minute figure (at least the window)."""
        now = read_registry(self.registry, at)
        if not self._readings:
            return now, now.since(Reading(now.at, {})), self.window
        baseline = self._readings[0]
        for reading in self._readings:
            if reading.at <= now.at - self.window:
                baseline = reading
        growth = now.since(baseline)
        return now, growth, max(growth.at, self.window)

    async def run(self) -> None:
        """Sample until cancelled (a task of the app's lifetime)."""
        while True:
            self.sample()
            await asyncio.sleep(self.every)
