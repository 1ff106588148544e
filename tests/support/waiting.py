"""Polling with a deadline: the one way tests wait for something to happen — ``wait_for``
in async tests, ``wait_until`` in plain ones, with one contract.

A deadline here is a bound on how long a test may hang on a slow, shared machine, never a
timing assertion: the condition is what the test checks, the deadline only ends the wait.
A condition that never held fails the test with ``what`` it waited for; when a process
is named (``alive=``) its death fails the wait at once, with its log, instead of letting
the test wait out the deadline for something a dead process will never do. A condition
may raise ``ignoring`` exceptions (a connection refused while a server starts): "not yet".

Where the test asserts on (or reports) what it found rather than on the wait itself,
``read_until`` and ``read_eventually`` read again until the value holds and return the
last one read, held or not: the test's own assertion then says what was there.
"""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["eventually", "read_eventually", "read_until", "wait_for", "wait_until"]

T = TypeVar("T")

Check = Callable[[], bool | Awaitable[bool]]
Ignored = type[BaseException] | tuple[type[BaseException], ...]


def _failure(what: str, within: float, alive: subprocess.Popen[str] | None) -> str:
    message = f"timed out after {within} s waiting for {what}"
    return message + _log_of(alive)


def _log_of(process: subprocess.Popen[str] | None) -> str:
    log = getattr(process, "log", None)  # tests.support.processes.ServeProcess keeps one
    return f"\n--- its log ---\n{log()[-4000:]}" if callable(log) else ""


def _check_alive(alive: subprocess.Popen[str] | None, what: str) -> None:
    if alive is not None and alive.poll() is not None:
        raise AssertionError(
            f"process exited with {alive.returncode} while waiting for {what}{_log_of(alive)}"
        )


async def _holds(check: Check, ignoring: Ignored) -> bool:
    try:
        result = check()
        if inspect.isawaitable(result):
            return bool(await result)
        return bool(result)
    except ignoring:
        return False


async def eventually(
    check: Check, within: float = 30.0, interval: float = 0.05, ignoring: Ignored = ()
) -> bool:
    """Poll ``check`` (plain or async) until it holds or ``within`` seconds pass.

    Returns whether it held, for tests that report a figure before asserting on it.
    """
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await _holds(check, ignoring):
            return True
        await asyncio.sleep(interval)
    return await _holds(check, ignoring)


async def wait_for(
    check: Check,
    within: float = 30.0,
    what: str = "",
    *,
    alive: subprocess.Popen[str] | None = None,
    ignoring: Ignored = (),
) -> None:
    """Until ``check`` (plain or async) holds; fails the test if it did not in time."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        _check_alive(alive, what or str(check))
        if await _holds(check, ignoring):
            return
        await asyncio.sleep(0.05)
    if not await _holds(check, ignoring):
        raise AssertionError(_failure(what or str(check), within, alive))


def wait_until(
    check: Callable[[], bool],
    within: float = 30.0,
    what: str = "",
    *,
    alive: subprocess.Popen[str] | None = None,
    ignoring: Ignored = (),
) -> None:
    """:func:`wait_for` for code that is not async (a test driving a process)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        _check_alive(alive, what or str(check))
        try:
            if check():
                return
        except ignoring:
            pass
        time.sleep(0.05)
    try:
        if check():
            return
    except ignoring:
        pass
    raise AssertionError(_failure(what or str(check), within, alive))


async def read_eventually(
    read: Callable[[], Awaitable[T]],
    holds: Callable[[T], bool],
    within: float = 30.0,
    interval: float = 0.05,
) -> T:
    """``await read()`` again until ``holds`` its value or ``within`` seconds pass: the
    last value read either way, for the test to assert on (or report before asserting)."""
    deadline = time.monotonic() + within
    value = await read()
    while not holds(value) and time.monotonic() < deadline:
        await asyncio.sleep(interval)
        value = await read()
    return value


def read_until(
    read: Callable[[], T],
    holds: Callable[[T], bool],
    within: float = 30.0,
    interval: float = 0.05,
) -> T:
    """:func:`read_eventually` for code that is not async (a test driving a process)."""
    deadline = time.monotonic() + within
    value = read()
    while not holds(value) and time.monotonic() < deadline:
        time.sleep(interval)
        value = read()
    return value
