"""A cap on the request bytes the process holds at once, across every connection.

Each request may buffer ``server.max_body_bytes`` and inflate to
``server.max_decompressed_bytes``; without a total, 200 slow uploads or a handful of
gzip bombs take the process to gigabytes. Ingest (:mod:`proxy.web.ingest`) charges every
chunk it reads and every piece it inflates to one :class:`BytesInFlight` per process,
through the request's :class:`Held` share, and the share is given back when the
request's answer is ready (the parsed events live that long). Past the cap a request is
answered 503 with ``Retry-After`` (the bytes will be free soon), and a request that
alone needs more than the cap 413 (it never could be taken).

Memory given back to the allocator is not always given back to the system: glibc keeps
freed heap pages for reuse, so after a burst of large bodies RSS would stay at its peak.
When the bytes held fall back to zero after a burst, the allocator is asked to return
its free pages (``malloc_trim``), off the event loop.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
from collections.abc import Callable, Mapping
from types import TracebackType

from proxy.http_errors import RequestError

__all__ = ["BytesInFlight", "Held"]


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


class BytesInFlight:
    """Request bytes held now (compressed as read plus inflated), against ``limit``."""

    def __init__(self, limit: int, retry_after: Mapping[str, str]) -> None:
        self.limit = limit
        self.held = 0
        self._retry_after = dict(retry_after)
        self._peak_since_trim = 0
        self._trim = _malloc_trim()
        self._trimming: asyncio.Future[object] | None = None
        self._trim_again = False

    def take(self, size: int, own: int) -> None:
        """Hold ``size`` more bytes for a request already holding ``own``; raise 413 when
        the request alone passes the limit, 503 when all requests together do."""
        held = self.held + size
        if held > self.limit:
            if own + size > self.limit:
                raise RequestError(
                    413,
                    f"request needs more than server.max_bytes_in_flight ({self.limit} bytes)",
                    reason="too_large",
                )
            raise RequestError(
                503,
                "the proxy holds as many request bytes as it may; retry later",
                headers=self._retry_after,
                reason="busy",
            )
        self.held = held
        if held > self._peak_since_trim:
            self._peak_since_trim = held

    def give_back(self, size: int) -> None:
        self.held -= size
        if self.held == 0 and self._peak_since_trim >= _TRIM_AFTER:
            self._peak_since_trim = 0
            # A moment later: the connections of the requests just answered (and their
            # buffers) go after the handlers, and trimming before them would miss them.
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

    def request(self) -> Held:
        """One request's share, to use as ``with budget.request() as held:``."""
        return Held(self)


class Held:
    """What one request holds of a :class:`BytesInFlight`; all given back on exit."""

    __slots__ = ("_budget", "size")

    def __init__(self, budget: BytesInFlight) -> None:
        self._budget = budget
        self.size = 0

    def take(self, size: int) -> None:
        self._budget.take(size, self.size)
        self.size += size

    def __enter__(self) -> Held:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.size:
            self._budget.give_back(self.size)
            self.size = 0
