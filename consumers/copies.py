"""Copies of one Kafka record, dropped before they reach a target a second time.

A proxy's spool drain re-sends a batch the broker did not confirm in time. After a quorum
loss the one surviving leader had written each try without committing it, and when the
quorum returned every try was committed: ``i0 i1 i2 i2 i2 i3 i4 i2 i3 i4``. A consumer
delivering them all sends a run COMPLETE → RUNNING → COMPLETE, and the target keeps the
state applied last. Each try is the same record, with the same key and the same order
stamp the proxy put on it when it took the event (proxy/kafka/order_stamp.py), so
a copy is recognised exactly: a record whose key, stamp and size were delivered (or
dead-lettered) already is skipped and counted as a duplicate. Records without a stamp
(written by another producer) are never taken for copies.

Remembered in memory, least recently seen forgotten past ``max_entries``: a copy that comes
after a restart of the daemon is delivered again (the consumer's ``dedupe`` journal covers
that).
"""

from __future__ import annotations

from collections import OrderedDict

from confluent_kafka import Message

from proxy.kafka.order_stamp import stamp_of

__all__ = ["CopyFilter"]


class CopyFilter:
    def __init__(self, max_entries: int = 100_000) -> None:
        self._seen: OrderedDict[tuple[bytes | None, int, int], None] = OrderedDict()
        self._max = max_entries

    @staticmethod
    def _identity(message: Message) -> tuple[bytes | None, int, int] | None:
        stamp = stamp_of(message.headers())
        if stamp is None:
            return None
        key = message.key()
        return (key if isinstance(key, bytes) else None, stamp, len(message))

    def is_copy(self, message: Message) -> bool:
        """Whether this very record was delivered or dead-lettered already."""
        identity = self._identity(message)
        if identity is None or identity not in self._seen:
            return False
        self._seen.move_to_end(identity)
        return True

    def finished(self, message: Message) -> None:
        """``message`` reached its end (delivered, dead-lettered): later copies are copies."""
        identity = self._identity(message)
        if identity is None:
            return
        self._seen[identity] = None
        self._seen.move_to_end(identity)
        if len(self._seen) > self._max:
            self._seen.popitem(last=False)
