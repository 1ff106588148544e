"""Which offset of a partition may be committed, when deliveries finish out of order.

Events of different run keys in one partition are delivered concurrently, so offset 7
may finish before offset 5. Kafka's committed offset means "everything before this is
done", so it may only move past offsets that are all finished: the commit point is the
lowest offset still pending.
"""

from __future__ import annotations

from collections import deque

__all__ = ["OffsetTracker"]


class OffsetTracker:
    """Offsets of one partition, in fetch order, with which of them are done."""

    def __init__(self) -> None:
        self._pending: deque[int] = deque()
        self._done: set[int] = set()
        self._next: int | None = None  # offset after the last contiguous done one
        self.committed: int | None = None  # what was last handed to Kafka

    def add(self, offset: int) -> None:
        self._pending.append(offset)

    def done(self, offset: int) -> None:
        self._done.add(offset)
        while self._pending and self._pending[0] in self._done:
            first = self._pending.popleft()
            self._done.discard(first)
            self._next = first + 1

    @property
    def position(self) -> int | None:
        """The first offset not yet finished (what a restart would read first), if known."""
        if self._next is not None:
            return self._next
        return self._pending[0] if self._pending else None

    def to_commit(self) -> int | None:
        """The commit point if it moved since the last commit, else None."""
        if self._next is None or self._next == self.committed:
            return None
        return self._next

    @property
    def pending(self) -> int:
        return len(self._pending)
