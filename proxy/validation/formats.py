"""String formats the OpenLineage spec names: ``uuid``, ``uri`` and ``date-time``.

The spec's JSON Schemas say ``"format": "uuid" | "uri" | "date-time"``. Pydantic's own
``UUID``/``AnyUrl``/``datetime`` types are too lenient for that (they accept numbers,
missing offsets, UUIDs without dashes), so the checks here follow the RFCs exactly:
RFC 4122 text form, RFC 3986 ``URI`` (absolute, with scheme) and RFC 3339 ``date-time``.

``Uuid`` and ``Uri`` are pattern constraints, checked inside pydantic-core (Rust regex);
``DateTime`` needs a calendar check (no 30 February) so it is a Python after-validator.
"""

from __future__ import annotations

import calendar
import re
from typing import Annotated

from pydantic import AfterValidator, StringConstraints
from pydantic_core import PydanticCustomError

__all__ = [
    "DATE_TIME_MESSAGE",
    "PATTERN_MESSAGES",
    "URI_MESSAGE",
    "URI_PATTERN",
    "UUID_MESSAGE",
    "UUID_PATTERN",
    "DateTime",
    "Uri",
    "Uuid",
    "is_date_time",
    "is_uri",
    "is_uuid",
]

UUID_PATTERN = r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"

# RFC 3986 §3 "URI" production, written out so that the same text compiles both in
# Python ``re`` and in pydantic-core's Rust regex engine.
_UNRESERVED = r"A-Za-z0-9\-._~"
_SUB_DELIMS = r"!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_USERINFO = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*"
_HOST = rf"(?:\[[0-9A-Fa-f:.vV]+\]|(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*)"
_AUTHORITY = rf"(?:{_USERINFO}@)?{_HOST}(?::[0-9]*)?"
_HIER_PART = (
    rf"(?://{_AUTHORITY}(?:/{_PCHAR}*)*"  # "//" authority path-abempty
    rf"|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"  # path-absolute
    rf"|{_PCHAR}+(?:/{_PCHAR}*)*"  # path-rootless
    r"|)"  # path-empty
)
_QUERY = rf"(?:{_PCHAR}|[/?])*"
URI_PATTERN = rf"^[A-Za-z][A-Za-z0-9+\-.]*:{_HIER_PART}(?:\?{_QUERY})?(?:#{_QUERY})?$"

UUID_MESSAGE = "not a valid UUID"
URI_MESSAGE = "not a valid URI"
DATE_TIME_MESSAGE = "not a valid RFC 3339 date-time"

# pydantic reports a failed pattern with the pattern itself; this turns it back into words.
PATTERN_MESSAGES = {UUID_PATTERN: UUID_MESSAGE, URI_PATTERN: URI_MESSAGE}

# fullmatch on the unanchored text: Python's "$" would also match before a final "\n".
_URI_RE = re.compile(URI_PATTERN[1:-1])
_UUID_RE = re.compile(UUID_PATTERN[1:-1])
# RFC 3339 §5.6: full-date "T" full-time, offset mandatory; "T" and "Z" may be lower case.
_DATE_TIME_RE = re.compile(
    r"(\d{4})-(0[1-9]|1[0-2])-(\d{2})[Tt]([01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?"
    r"(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)",
    re.ASCII,
)


_DAYS_IN_MONTH = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_uri(value: str) -> bool:
    """True when ``value`` is an RFC 3986 URI (scheme required)."""
    return _URI_RE.fullmatch(value) is not None


def is_uuid(value: str) -> bool:
    """True when ``value`` is a UUID in RFC 4122 text form (what ``Uuid`` accepts)."""
    return _UUID_RE.fullmatch(value) is not None


def is_date_time(value: str) -> bool:
    """True when ``value`` is an RFC 3339 date-time with a real calendar day."""
    match = _DATE_TIME_RE.fullmatch(value)
    if match is None:
        return False
    year, month, day = int(match[1]), int(match[2]), int(match[3])
    # A table, not calendar.monthrange (which works out the weekday too): this runs for
    # every date-time of every event.
    last = _DAYS_IN_MONTH[month] + (month == 2 and calendar.isleap(year))
    return 1 <= day <= last


def _check_date_time(value: str) -> str:
    if not is_date_time(value):
        raise PydanticCustomError("date_time_format", DATE_TIME_MESSAGE)
    return value


Uuid = Annotated[str, StringConstraints(pattern=UUID_PATTERN)]
Uri = Annotated[str, StringConstraints(pattern=URI_PATTERN)]
DateTime = Annotated[str, AfterValidator(_check_date_time)]
