"""One cap on the bytes of events the process holds in its queues (``server.max_queued_bytes``).

Events wait in queues where nobody is waiting for them: each tap reader's
(:mod:`proxy.tap.hub`), the outboxes to sibling workers' taps (:mod:`proxy.tap.relay`)
and the best-effort deliveries (:class:`proxy.ingest.pipeline.BestEffortQueue`). A count of
events does not bound memory — 1,000 events of 900 KB are 900 MB — so every one of them
takes an event's serialized size from this one budget before it holds the event, and
gives it back when the event is written, delivered or dropped. An event the budget
cannot take is dropped for that queue and counted there; nothing ever waits for room.

The size is the event's JSON: what the tap writes and the target is sent. Held as a
dict an event takes about as much again (more for events of many small values), and one
event queued for two readers is counted twice, though held once.

When the budget is back to zero after a burst, the allocator is asked to give the freed
pages back to the system (:mod:`proxy.support.free_memory`).
"""

from __future__ import annotations

import enum

from proxy.support.free_memory import TrimAfterBurst

__all__ = ["DEFAULT_MAX_QUEUED_BYTES", "Queue", "QueueBudget"]

DEFAULT_MAX_QUEUED_BYTES = 64 * 1024 * 1024


class Queue(enum.StrEnum):
    """The queues that draw from the budget: a metric label."""

    TAP = "tap"
    TAP_RELAY = "tap_relay"
    BEST_EFFORT = "best_effort"


class QueueBudget:
    """Bytes of queued events held now, per queue, against ``limit`` for all of them."""

    def __init__(self, limit: int = DEFAULT_MAX_QUEUED_BYTES) -> None:
        self.limit = limit
        self.held = 0
        self.held_by = dict.fromkeys(Queue, 0)
        # Takes refused so far: a holder that may give bytes back (a stalled tap reader)
        # looks at it to learn that someone went short.
        self.refusals = 0
        self._trim = TrimAfterBurst()

    def take(self, queue: Queue, size: int) -> bool:
        """Hold ``size`` bytes for ``queue`` if they fit; False (nothing held) if not."""
        held = self.held + size
        if held > self.limit:
            self.refusals += 1
            return False
        self.held = held
        self.held_by[queue] += size
        self._trim.held(held)
        return True

    def held_for(self, queue: Queue) -> int:
        return self.held_by[queue]

    def give_back(self, queue: Queue, size: int) -> None:
        self.held -= size
        self.held_by[queue] -= size
        self._trim.held(self.held)
