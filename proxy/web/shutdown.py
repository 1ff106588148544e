"""SIGTERM's one time budget, shared by every stage of shutdown."""

from __future__ import annotations

import time

from aiohttp import web

__all__ = ["ShutdownBudget"]


class ShutdownBudget:
    """SIGTERM's one budget (``server.shutdown_timeout_seconds``), shared by every stage
    of shutdown — in-flight requests, best-effort queue, Kafka flush — so that together
    they never take longer than the budget."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._started: float | None = None

    async def start(self, app: web.Application) -> None:
        """``on_shutdown`` hook: aiohttp runs it before waiting for in-flight requests."""
        self._started = time.monotonic()

    def remaining(self) -> float:
        if self._started is None:
            return self.seconds
        return max(0.0, self.seconds - (time.monotonic() - self._started))
