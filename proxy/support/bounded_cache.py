"""A map that never holds more than a set number of entries: the oldest goes first.

The one bounded cache of the project (the validator's memos, the rules' match memo, the
consumers' duplicate filter, the RUNNING throttle): anything a client can make grow with
ever-new keys is kept in one, so memory has a ceiling whatever the traffic. Putting a key
makes it the newest; :meth:`BoundedCache.touch` does so for a key read again, for the
callers whose "oldest" means least recently used. Imports nothing of the project, so any
layer may use it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

__all__ = ["BoundedCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """At most ``max_entries`` key → value pairs, in the order they were put (oldest
    first); putting one more evicts the oldest. An :class:`OrderedDict` underneath: a
    plain dict slows down when its oldest key is deleted over and over."""

    __slots__ = ("_entries", "max_entries")

    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, not {max_entries}")
        self.max_entries = max_entries
        self._entries: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        """The keys, oldest first."""
        return iter(self._entries)

    def get(self, key: K) -> V | None:
        """The value of ``key`` (None if absent); its age does not change."""
        return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        """Hold ``key`` → ``value`` as the newest entry; evict the oldest beyond the cap."""
        entries = self._entries
        entries[key] = value
        entries.move_to_end(key)
        if len(entries) > self.max_entries:
            entries.popitem(last=False)

    def touch(self, key: K) -> bool:
        """Make ``key`` the newest entry if held (a least-recently-used order); whether
        it was held."""
        if key in self._entries:
            self._entries.move_to_end(key)
            return True
        return False

    def pop(self, key: K) -> V | None:
        """Forget ``key``; its value, or None if absent."""
        return self._entries.pop(key, None)
