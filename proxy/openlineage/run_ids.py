"""UUIDv7 run ids (RFC 9562 §5.7): the run's start time in the first 48 bits.

Data.Rentgen refuses any other version, and a time-ordered id keeps a run's index
entries together in the stores downstream. Python 3.11's ``uuid`` has no ``uuid7``, so
it is built here: 48-bit Unix milliseconds, version 7, 12 random bits, the RFC variant
(``10``), 62 random bits.
"""

from __future__ import annotations

import os
import time
import uuid

__all__ = ["uuid7"]

_MAX_MS = (1 << 48) - 1


def uuid7(unix_ms: int | None = None) -> str:
    """A random UUIDv7 for ``unix_ms`` (default: now), in the canonical text form."""
    ms = time.time_ns() // 1_000_000 if unix_ms is None else unix_ms
    if not 0 <= ms <= _MAX_MS:
        raise ValueError(f"{ms} ms is outside what a UUIDv7 can hold")
    random = int.from_bytes(os.urandom(10), "big")  # 80 bits: 12 for rand_a, 62 for rand_b
    rand_a, rand_b = random >> 68, random & ((1 << 62) - 1)
    value = ms << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    return str(uuid.UUID(int=value))
