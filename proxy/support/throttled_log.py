"""Log lines that may repeat thousands of times a second, at a limited rate.

A misbehaving client, a full disk or a broker that is away makes the same line repeat
for every request; the log (which may share the full disk) gets one line per ``key``
every ``interval`` seconds, saying how many like it were held back since the last one.
Counters, not log lines, carry the numbers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

__all__ = ["ThrottledLog"]


class ThrottledLog:
    """One line per key per ``interval`` seconds on ``logger``."""

    def __init__(self, logger: logging.Logger, interval: float = 10.0) -> None:
        self.logger = logger
        self.interval = interval
        # key → (monotonic time of its last line, lines held back since then)
        self._last: dict[str, tuple[float, int]] = {}

    def log(
        self,
        level: int,
        key: str,
        message: str,
        *args: object,
        extra: Mapping[str, object] | None = None,
    ) -> bool:
        """Log ``message % args`` (with ``extra`` fields) unless a line with ``key`` was
        logged less than ``interval`` seconds ago; returns whether it was logged."""
        now = time.monotonic()
        last, held_back = self._last.get(key, (float("-inf"), 0))
        if now - last < self.interval:
            self._last[key] = (last, held_back + 1)
            return False
        self._last[key] = (now, 0)
        more = f" ({held_back} more like it not logged)" if held_back else ""
        self.logger.log(level, message + "%s", *args, more, extra=extra)
        return True

    def info(
        self, key: str, message: str, *args: object, extra: Mapping[str, object] | None = None
    ) -> bool:
        return self.log(logging.INFO, key, message, *args, extra=extra)

    def warning(
        self, key: str, message: str, *args: object, extra: Mapping[str, object] | None = None
    ) -> bool:
        return self.log(logging.WARNING, key, message, *args, extra=extra)

    def error(
        self, key: str, message: str, *args: object, extra: Mapping[str, object] | None = None
    ) -> bool:
        return self.log(logging.ERROR, key, message, *args, extra=extra)
