"""The order in which a proxy acknowledged events, carried with each Kafka record.

Kafka keeps order within a partition only; a run's events share a key (one partition),
but a reader of one run's output, a parent and its children, or the first event naming a
namespace sit in other partitions. Targets whose result depends on arrival order
(Marquez) are therefore fed in the order the proxy took the events, merged across
partitions by this stamp (consumers/ordered.py).

The stamp is the wall clock in nanoseconds when the proxy writes the event (to Kafka or to
its spool), made strictly increasing within the process. Events a client sends one after
another — the second only after the first was acknowledged — get increasing stamps even
from different proxy replicas, as long as the replicas' clocks agree to better than a
client's round trip (NTP keeps them within milliseconds). The header is text, so
``kcat`` shows it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

__all__ = ["ORDER_HEADER", "next_stamp", "stamp_of"]

ORDER_HEADER = "lineage_proxy_order"

_last = 0


def next_stamp() -> int:
    """Nanoseconds since the epoch, greater than any stamp this process gave before."""
    global _last
    now = time.time_ns()
    _last = now if now > _last else _last + 1
    return _last


def stamp_of(
    headers: Sequence[tuple[str, str | bytes | None]] | Mapping[str, str | bytes | None] | None,
) -> int | None:
    """The stamp a record carries, or None (written by another producer, or unreadable)."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers or ()
    for name, value in pairs:
        if name == ORDER_HEADER and value:
            try:
                return int(value)
            except ValueError:
                return None
    return None
