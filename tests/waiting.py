"""Polling with a deadline: the one way tests wait for something to happen.

A deadline here is a bound on how long a test may hang on a slow, shared machine, never a
timing assertion: the condition is what the test checks, the deadline only ends the wait.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

Check = Callable[[], bool | Awaitable[bool]]


async def _holds(check: Check) -> bool:
    result = check()
    if inspect.isawaitable(result):
        return bool(await result)
    return bool(result)


async def eventually(check: Check, within: float = 30.0, interval: float = 0.05) -> bool:
    """Poll ``check`` (plain or async) until it holds or ``within`` seconds pass.

    Returns whether it held, for tests that report a figure before asserting on it.
    """
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await _holds(check):
            return True
        await asyncio.sleep(interval)
    return await _holds(check)


async def wait_for(check: Check, within: float = 30.0, what: str = "") -> None:
    """Like :func:`eventually`, but a condition that never held fails the test."""
    if not await eventually(check, within):
        raise AssertionError(f"timed out after {within} s waiting for {what or check}")
