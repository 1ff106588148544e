"""Repairs in the log: one line per repair kind a minute, so an operator learns which
producer sends what, without a line per event.

Repairs are counted (``lineage_proxy_events_repaired_total{repair}``) but a counter
does not say who needs fixing. The first repair of a kind is logged at once with the
producer, the job, the place and the value before and after; later ones of that kind
within :data:`REPEAT_SECONDS` are only counted, and said with the next line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from proxy.openlineage.repaired import RepairedEvent
from proxy.openlineage.sender import Sender

__all__ = ["REPEAT_SECONDS", "RepairLog"]

log = logging.getLogger(__name__)

REPEAT_SECONDS = 60.0
# How much of a value before/after repair a line quotes (they are timestamps and URIs).
_VALUE_CHARS = 120


class RepairLog:
    """Logs repairs, at most one line per repair kind per :data:`REPEAT_SECONDS`."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, repeat_seconds: float = REPEAT_SECONDS
    ) -> None:
        self._clock = clock
        self._repeat = repeat_seconds
        # repair name → (time of its last line, repairs held back since)
        self._last: dict[str, tuple[float, int]] = {}

    def repaired(self, event: RepairedEvent) -> None:
        now = self._clock()
        for repair in event.repairs:
            last, held_back = self._last.get(repair.name, (float("-inf"), 0))
            if now - last < self._repeat:
                self._last[repair.name] = (last, held_back + 1)
                continue
            self._last[repair.name] = (now, 0)
            more = (
                f" ({held_back} more like it in the last {self._repeat:.0f} s)" if held_back else ""
            )
            log.info(
                "repaired %s at %s%s: %r → %r%s",
                repair.name,
                repair.pointer,
                Sender.of(event).described(),
                repair.before[:_VALUE_CHARS],
                repair.after[:_VALUE_CHARS],
                more,
            )
