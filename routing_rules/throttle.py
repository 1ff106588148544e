"""``throttle:``: at most one RUNNING event per run per interval.

Streaming jobs (Flink, Spark Structured Streaming) emit RUNNING events continuously; a
rule with a throttle lets the first RUNNING event of a run through, suppresses the
next ones until the interval has passed, and never holds back START, COMPLETE, FAIL,
ABORT or OTHER. State is per process (N proxies behind a load balancer let up to N
through per interval) and bounded: the least recently seen runs are forgotten first,
and a run's terminal event forgets it at once. A rules reload starts with fresh state
(at most one extra RUNNING event per run passes).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from proxy.support.bounded_cache import BoundedCache

__all__ = ["RunningThrottle"]

_TERMINAL = frozenset(("COMPLETE", "FAIL", "ABORT"))


class RunningThrottle:
    def __init__(
        self,
        interval_seconds: float,
        max_runs: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval_seconds
        self.max_runs = max_runs
        self._clock = clock
        self._last_passed: BoundedCache[str, float] = BoundedCache(max_runs)

    def __len__(self) -> int:
        return len(self._last_passed)

    def suppresses(self, event: dict[str, Any]) -> bool:
        """True when ``event`` is a RUNNING event of a run that had one pass too recently."""
        event_type = event.get("eventType")
        run = event.get("run")
        run_id = run.get("runId") if isinstance(run, dict) else None
        if not isinstance(run_id, str):
            return False
        if event_type != "RUNNING":
            if event_type in _TERMINAL:
                self._last_passed.pop(run_id)
            return False
        now = self._clock()
        last = self._last_passed.get(run_id)
        if last is not None and now - last < self.interval:
            return True
        self._last_passed.put(run_id, now)
        return False
