"""A cap on the request bytes the process holds at once, across every connection.

Each request may buffer ``server.max_body_bytes`` and inflate to
``server.max_decompressed_bytes``; without a total, 200 slow uploads or a handful of
gzip bombs take the process to gigabytes. Ingest (:mod:`proxy.web.ingest`) charges every
chunk it reads and every piece it inflates to one :class:`BytesInFlight` per process,
through the request's :class:`Held` share, and the share is given back when the
request's answer is ready (the parsed events live that long). Past the cap a request is
answered 503 with ``Retry-After`` (the bytes will be free soon), and a request that
alone needs more than the cap 413 (it never could be taken).

After a burst, when nothing is held any more, the allocator is asked to give its free
pages back to the system (:mod:`proxy.support.free_memory`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType

from proxy.support.free_memory import TrimAfterBurst
from proxy.support.request_errors import RequestError

__all__ = ["BytesInFlight", "Held"]


class BytesInFlight:
    """Request bytes held now (compressed as read plus inflated), against ``limit``."""

    def __init__(self, limit: int, retry_after: Mapping[str, str]) -> None:
        self.limit = limit
        self.held = 0
        self._retry_after = dict(retry_after)
        self._trim = TrimAfterBurst()

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
        self._trim.held(held)

    def give_back(self, size: int) -> None:
        self.held -= size
        self._trim.held(self.held)

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
