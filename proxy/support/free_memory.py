"""Giving memory back to the system after a burst of large buffers.

Memory Python frees is not always given back to the system: glibc keeps freed heap
pages for reuse, so after a burst of large bodies or queued events RSS would stay at its
peak for good. A holder of bytes (requests in flight, queued events) reports what it
holds; when that falls back to zero after a burst, glibc is asked to return its free
pages (``malloc_trim``), a moment later and off the event loop.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
from collections.abc import Callable

__all__ = ["TrimAfterBurst"]

# A burst this large (bytes held at the peak since the last trim) is worth a trim.
_TRIM_AFTER = 16 * 1024 * 1024
_TRIM_DELAY_SECONDS = 1.0


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, or None where there is no such call (musl, macOS)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


class TrimAfterBurst:
    """Trims the heap once what a holder holds falls to zero after at least ``burst``."""

    def __init__(self, burst: int = _TRIM_AFTER) -> None:
        self.burst = burst
        self._peak_since_trim = 0
        self._trim = _malloc_trim()
        self._trimming: asyncio.Future[object] | None = None
        self._trim_again = False

    def held(self, now: int) -> None:
        """What the holder holds ``now`` (after each change); on the event loop."""
        if now > self._peak_since_trim:
            self._peak_since_trim = now
        elif now == 0 and self._peak_since_trim >= self.burst:
            self._peak_since_trim = 0
            # A moment later: what held the buffers (a request's connection, a reader's
            # response) goes after the holder gave them back; trimming first misses it.
            asyncio.get_running_loop().call_later(_TRIM_DELAY_SECONDS, self._return_free_memory)

    def _return_free_memory(self) -> None:
        if self._trim is None:
            return
        if self._trimming is not None and not self._trimming.done():
            self._trim_again = True  # what was freed since it started is trimmed after it
            return
        # It walks the heap (milliseconds after a large burst): not on the event loop.
        self._trimming = asyncio.get_running_loop().run_in_executor(None, self._trim)
        self._trimming.add_done_callback(self._trimmed)

    def _trimmed(self, _: asyncio.Future[object]) -> None:
        if self._trim_again:
            self._trim_again = False
            self._return_free_memory()
