"""The loop guard: how many proxies an event has passed through, carried along with it.

A consumer (or a direct HTTP route) whose target is a proxy — this one by mistake, or
another one on purpose — sends events back in; pointed at its own proxy, one event
becomes an endless stream. So every HTTP delivery says how many proxies the event has
already passed (``Lineage-Proxy-Hops``), the proxy keeps that count with the event in
Kafka (header ``lineage_proxy_hops``), and the next delivery says one more. A proxy
takes an event that passed at most :data:`MAX_HOPS` proxies before (one proxy feeding
another is a real setup) and refuses one that passed more: HTTP 508 with the reason,
which HTTP targets treat as permanent, so a loop ends in the dead-letter topic after
one round instead of growing.

The count of the event being handled lives in a context variable: set from the request
header for the request's task (aiohttp runs each request in a context of its own), and
by a consumer from the Kafka headers around each delivery.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = [
    "HEADER",
    "KAFKA_HEADER",
    "MAX_HOPS",
    "TooManyHops",
    "carrying",
    "current_hops",
    "hops_from_kafka",
    "kafka_headers",
    "outgoing_headers",
    "take_request_hops",
]

HEADER = "Lineage-Proxy-Hops"
KAFKA_HEADER = "lineage_proxy_hops"
# Proxies an accepted event may have passed before this one.
MAX_HOPS = 1

_HOPS: ContextVar[int] = ContextVar("lineage_proxy_hops", default=0)


class TooManyHops(ValueError):
    """The request's event passed more proxies than :data:`MAX_HOPS`: a loop."""


def take_request_hops(value: str | None) -> int:
    """Read a request's ``Lineage-Proxy-Hops`` and make it the current count; raise
    :class:`TooManyHops` past :data:`MAX_HOPS` (or ValueError for a value that is not a
    count)."""
    hops = 0 if value is None else int(value.strip())
    if hops < 0:
        raise ValueError(f"{HEADER} must be a count, got {value!r}")
    if hops > MAX_HOPS:
        raise TooManyHops(
            f"this event already passed {hops} lineage proxies ({HEADER}: {hops}; at most "
            f"{MAX_HOPS} is taken): a consumer or route sends events back to a proxy they "
            "came from — point it at the real target"
        )
    _HOPS.set(hops)
    return hops


def current_hops() -> int:
    """Proxies the event being handled passed before this one."""
    return _HOPS.get()


def kafka_headers() -> list[tuple[str, bytes]]:
    """The count to keep with the event in Kafka (none for an event sent by a client)."""
    hops = _HOPS.get()
    return [(KAFKA_HEADER, str(hops).encode())] if hops else []


def hops_from_kafka(
    headers: Iterable[tuple[str, bytes | str | None]] | Mapping[str, bytes | str | None] | None,
) -> int:
    """The count a Kafka message carries (0 without one, or with one not a count)."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers or ()
    for name, value in pairs:
        if name == KAFKA_HEADER and value is not None:
            text = value.decode() if isinstance(value, bytes) else value
            return int(text) if text.isdigit() else 0
    return 0


@contextmanager
def carrying(hops: int) -> Iterator[None]:
    """Deliveries inside say the event passed ``hops`` proxies (a consumer's message)."""
    token = _HOPS.set(hops)
    try:
        yield
    finally:
        _HOPS.reset(token)


def outgoing_headers() -> dict[str, str]:
    """What an HTTP delivery adds: the proxies passed, this one included."""
    return {HEADER: str(_HOPS.get() + 1)}
