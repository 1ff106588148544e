"""JSON in and out of the proxy, keeping every number exactly as the client sent it.

orjson is the fast path, but it reads an integer outside [-2^63, 2^64) as a float
(``18446744073709551616`` would be stored as ``1.8446744073709552e+19``) and cannot
write such an integer at all. Such an integer has at least 19 digits, so a body with
no run of 19 digits is safe with orjson alone. That is checked with one
``bytes.translate`` and a substring search (~3 µs per 2.5 KB event; a regex takes
~40 µs). A body with such a run is parsed again by the standard library, which keeps
integers of any size, and :func:`dumps` falls back to it when orjson refuses one.
orjson checks the syntax first, so both paths accept exactly the same bodies; an integer
past a double's range (309 digits and more) makes orjson refuse the body ("number is
infinity"), so there the syntax is checked with every run of 19 digits or more made
``0``. Integers are kept up to :data:`MAX_INTEGER_DIGITS` digits (Python's own bound:
converting digits to an integer takes time quadratic in their number); a number that
would be infinite as a double is refused, as orjson refuses it.

Nesting: orjson reads 1,024 levels of arrays and objects but writes only
:data:`WRITABLE_DEPTH`. :func:`too_deep` finds, without recursion, the first value
past a depth, so that the proxy refuses a body it could not store (400 with a pointer)
instead of failing while writing it. Nothing here recurses on client data.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

import orjson

from proxy.validation.issues import escape_pointer_token

__all__ = ["MAX_INTEGER_DIGITS", "WRITABLE_DEPTH", "JSONDecodeError", "dumps", "loads", "too_deep"]

JSONDecodeError = orjson.JSONDecodeError

# Every digit made "0", then look for 19 of them in a row.
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
_NINETEEN_DIGITS = b"0" * 19
_LONG_DIGIT_RUNS = re.compile(rb"[0-9]{19,}")

MAX_INTEGER_DIGITS = sys.get_int_max_str_digits()
"""The most digits an integer may have (Python's default bound, 4,300)."""

WRITABLE_DEPTH = 254
"""Arrays and objects nested in one another that :func:`dumps` writes (orjson's limit;
a value holding 255 levels is refused with "Recursion limit reached")."""


def loads(body: bytes) -> Any:
    """Parse ``body``; raise :class:`JSONDecodeError` if it is not JSON."""
    try:
        value = orjson.loads(body)
    except JSONDecodeError:
        if _NINETEEN_DIGITS not in body.translate(_DIGITS_TO_ZERO):
            raise
        # Perhaps only an integer past a double's range: the syntax without long runs.
        orjson.loads(_LONG_DIGIT_RUNS.sub(b"0", body))
        return _exact(body)
    if _NINETEEN_DIGITS not in body.translate(_DIGITS_TO_ZERO):
        return value
    return _exact(body)


def _exact(body: bytes) -> Any:
    """``body`` (valid JSON by orjson's rules) with every integer exact."""
    text = body.decode()
    try:
        return json.loads(text, parse_float=_finite)
    except RecursionError:
        raise JSONDecodeError("too deeply nested", text, 0) from None
    except ValueError as exc:  # digits past MAX_INTEGER_DIGITS, or an infinite double
        message = str(exc).split(";")[0]
        raise JSONDecodeError(message, text, 0) from None


def _finite(digits: str) -> float:
    number = float(digits)
    if math.isinf(number):
        raise ValueError("number is infinity when parsed as double")
    return number


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON of ``value``, integers of any size written exactly."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        if not _has_big_int(value):
            raise
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _has_big_int(value: Any) -> bool:
    """Whether ``value`` holds an integer orjson cannot write; iterative, any depth."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, int):
            if not -(2**63) <= item < 2**64:
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def too_deep(value: Any, limit: int) -> str | None:
    """The JSON pointer of the first array or object nested more than ``limit`` levels
    deep in ``value`` (``value`` itself, if a container, is level 1), or None.

    Depth first, with an explicit stack: the client chooses the depth (up to the 1,024
    levels the parser takes), so the call stack must not.
    """
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        item, pointer, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = ((escape_pointer_token(k), v) for k, v in item.items())
        elif isinstance(item, list):
            children = ((str(i), v) for i, v in enumerate(item))
        else:
            continue
        if depth > limit:
            return pointer
        # Reversed so that the first child is looked at first: the pointer is then the
        # first offending place in document order.
        stack.extend(
            (child, f"{pointer}/{token}", depth + 1)
            for token, child in reversed(list(children))
            if isinstance(child, (dict, list))
        )
    return None
