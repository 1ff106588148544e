"""Which offset of a partition may be committed, when deliveries finish out of order.

Events of different run keys in one partition are delivered concurrently, so offset 7
may finish before offset 5. Kafka's committed offset means "everything before this is
done", so it may only move past offsets that are all finished: the commit point is the
lowest offset still pending.

The offsets finished *past* that point go with the commit, in its metadata
(:func:`encode_done`): a process that takes the partition over — after a rebalance, a
crash or SIGKILL — skips them instead of delivering them a second time
(:func:`decode_done`). What it still re-sends is what was delivered after the last commit.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

__all__ = ["OffsetTracker", "decode_done", "encode_done"]

# Kafka keeps at most offset.metadata.max.bytes (4,096 by default) of commit metadata.
_METADATA_LIMIT = 3_500
_PREFIX = "lp1:"


def encode_done(offset: int, done: Iterable[int]) -> str:
    """The offsets in ``done`` (all past ``offset``) as ranges relative to it, e.g.
    ``lp1:2-4,7``; past the size Kafka keeps, the later ones are left out (they are
    delivered again, as without metadata)."""
    parts: list[str] = []
    size = len(_PREFIX)
    start = last = None
    for value in [*sorted(done), None]:
        if value is not None and last is not None and value == last + 1:
            last = value
            continue
        if start is not None and last is not None:
            part = f"{start - offset}" if start == last else f"{start - offset}-{last - offset}"
            if size + len(part) + 1 > _METADATA_LIMIT:
                break
            parts.append(part)
            size += len(part) + 1
        start = last = value
    return _PREFIX + ",".join(parts) if parts else ""


def decode_done(offset: int, metadata: str | None) -> set[int]:
    """The offsets :func:`encode_done` wrote for a commit at ``offset``; none for metadata
    it did not write."""
    if not metadata or not metadata.startswith(_PREFIX):
        return set()
    done: set[int] = set()
    try:
        for part in filter(None, metadata[len(_PREFIX) :].split(",")):
            first, _, last = part.partition("-")
            done.update(range(offset + int(first), offset + int(last or first) + 1))
    except ValueError:
        return set()
    return done


class OffsetTracker:
    """Offsets of one partition, in fetch order, with which of them are done."""

    def __init__(self, done_before: Iterable[int] = ()) -> None:
        self._pending: deque[int] = deque()
        self._done: set[int] = set()
        self._next: int | None = None  # offset after the last contiguous done one
        self._committed: int | None = None  # what Kafka last took
        # Offsets an earlier owner finished past its commit point (its commit metadata).
        self._done_before = set(done_before)
        self._changes = 0  # done() calls, to tell whether the metadata changed
        self._committed_changes = 0

    def add(self, offset: int) -> bool:
        """Track ``offset``, fetched; True when an earlier owner of the partition finished
        it already (then it is to be skipped, and marked done)."""
        self._pending.append(offset)
        if offset in self._done_before:
            self._done_before.discard(offset)
            return True
        return False

    def done(self, offset: int) -> None:
        self._changes += 1
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

    def commit_point(self) -> tuple[int, str, int] | None:
        """(offset, metadata, changes) to commit when anything finished since the last
        commit — the point moved, or offsets past it finished; None otherwise. Hand the
        triple to :meth:`committed_at` once Kafka took it."""
        offset = self.position
        if offset is None:
            return None
        if offset == self._committed and self._changes == self._committed_changes:
            return None
        return offset, encode_done(offset, self._done), self._changes

    def committed_at(self, point: tuple[int, str, int]) -> None:
        self._committed, _, self._committed_changes = point
