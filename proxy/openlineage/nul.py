"""NUL characters (``\\u0000``) in the strings of a serialized event.

JSON can carry NUL only escaped, ``\\u0000``, so finding and removing them needs no
parsing: an escape is real when an even number of backslashes precedes it (``\\\\u0000`` is
a backslash followed by the text ``u0000``). Working on the bytes keeps every other byte
of the event as the client sent it. PostgreSQL refuses NUL in text and ``jsonb`` (Marquez
answers 500), hence :mod:`proxy.destinations.http.marquez`.
"""

from __future__ import annotations

import re

__all__ = ["has_nul", "without_nul"]

_ESCAPE = b"\\u0000"
_NUL = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")


def has_nul(payload: bytes) -> bool:
    """Whether a string (value or key) of the JSON ``payload`` holds a NUL character."""
    return _ESCAPE in payload and _NUL.search(payload) is not None


def without_nul(payload: bytes) -> bytes:
    """``payload`` with every NUL character removed from its strings."""
    return _NUL.sub(rb"\1", payload)
