"""Dataset names without their partition directories, as the official integration trims them.

A job that reads ``/events/dt=2024-01-01`` and ``/events/dt=2024-01-02`` reads one dataset,
``/events``. The official Spark integration (through the OpenLineage Java client's dataset
config) names datasets that way with four default trimmers, each of which removes the last
directory of a name when it looks like a partition:

- date: the last part holds a valid date as ``dd.MM.yyyy``, ``yyyyMMdd`` or ``yyyy-MM-dd``
  and nothing else but one ``T``, one ``Z``, digits, spaces, ``:``, ``.`` and ``-``
  (``2024-01-01``, ``20250722T0901Z``);
- key=value: the last part has exactly one ``=`` (``dt=2024-01-01``);
- multi-directory date: the last two parts are a year and a month (``2025/07``) or the last
  three a date (``2025/07/21``) — all of them are removed;
- year-month: the last part is ``yyyyMM`` or ``yyyy-MM``.

A name is never trimmed to nothing: the first part always stays. Trimmers are applied again
and again until none applies, so ``/a/b/2025-01-01/c=1/d=1`` becomes ``/a/b``. Dates are
checked like Java's default (smart) resolver: month 1 to 12, day 1 to 31 whatever the month.
Pure string work: no JVM, no file system.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["trim_dataset_name"]

_SEPARATOR = "/"

# Java's HashMap visits these formats in this order; the first valid date found decides.
_DATE_FORMATS = (
    ("dd.MM.yyyy", re.compile(r"\d{2}\.\d{2}\.\d{4}")),
    ("yyyyMMdd", re.compile(r"\d{8}")),
    ("yyyy-MM-dd", re.compile(r"\d{4}-\d{2}-\d{2}")),
)
# A four-letter year takes 4 to 19 digits; a fixed-width field after it keeps its own.
_PARSERS = {
    "dd.MM.yyyy": re.compile(r"(?P<d>\d{2})\.(?P<m>\d{2})\.(?P<y>\d{4,19})"),
    "yyyyMMdd": re.compile(r"(?P<y>\d{4,19})(?P<m>\d{2})(?P<d>\d{2})"),
    "yyyy-MM-dd": re.compile(r"(?P<y>\d{4,19})-(?P<m>\d{2})-(?P<d>\d{2})"),
    "yyyyMM": re.compile(r"(?P<y>\d{4,19})(?P<m>\d{2})"),
    "yyyy-MM": re.compile(r"(?P<y>\d{4,19})-(?P<m>\d{2})"),
}
_DATE_LEFTOVERS = re.compile(r"[\s:.\-\d]", re.ASCII)


def _parses(text: str, pattern: str) -> bool:
    """Whether ``text`` as a whole is a valid date (or year-month) in ``pattern``."""
    match = _PARSERS[pattern].fullmatch(text)
    if match is None:
        return False
    fields = match.groupdict()
    year, month = int(fields["y"]), int(fields["m"])
    day = int(fields.get("d") or 1)
    return year >= 1 and 1 <= month <= 12 and 1 <= day <= 31


def _split(name: str) -> list[str]:
    """``name.split("/")`` as Java splits: trailing empty parts dropped."""
    if _SEPARATOR not in name:
        return [name]
    parts = name.split(_SEPARATOR)
    while parts and not parts[-1]:
        parts.pop()
    return parts


def _has_parent(name: str) -> bool:
    """More than one part, not counting a leading ``/``: trimming leaves something."""
    if _SEPARATOR not in name:
        return False
    return len(_split(name[1:] if name.startswith(_SEPARATOR) else name)) > 1


def _last_part(name: str) -> str:
    return name[name.rfind(_SEPARATOR) + 1 :]


def _without_last_part(name: str) -> str:
    return name[: name.rfind(_SEPARATOR)]


def _is_date_directory(name: str) -> bool:
    if not _has_parent(name):
        return False
    last = _last_part(name)
    for pattern, finder in _DATE_FORMATS:
        for found in finder.finditer(last):
            candidate = found.group()
            if _parses(candidate, pattern):
                # Java removes the first match of the candidate read as a regex.
                rest = re.sub(candidate, "", last, count=1)
                rest = rest.replace("T", "", 1).replace("Z", "", 1)
                return not _DATE_LEFTOVERS.sub("", rest)
    return False


def _is_key_value_directory(name: str) -> bool:
    return _has_parent(name) and _last_part(name).count("=") == 1


def _is_year_month_directory(name: str) -> bool:
    if not _has_parent(name):
        return False
    last = _last_part(name)
    return _parses(last, "yyyyMM") or _parses(last, "yyyy-MM")


def _ends_with_year_month_dirs(parts: list[str]) -> bool:
    return len(parts) >= 3 and _parses(parts[-2] + parts[-1], "yyyyMM")


def _ends_with_date_dirs(parts: list[str]) -> bool:
    return len(parts) >= 4 and _parses(parts[-3] + parts[-2] + parts[-1], "yyyyMMdd")


def _dropping_last_part(applies: Callable[[str], bool]) -> Callable[[str], str | None]:
    def trim(name: str) -> str | None:
        return _without_last_part(name) if applies(name) else None

    return trim


def _trim_date_directories(name: str) -> str | None:
    """``…/2025/07`` or ``…/2025/07/21`` → ``…``, all the date's directories at once."""
    rooted = _split(name[1:] if name.startswith(_SEPARATOR) else name)
    if not (_ends_with_year_month_dirs(rooted) or _ends_with_date_dirs(rooted)):
        return None
    # The same last parts, now with the leading "" of a rooted name kept.
    parts = _split(name)
    keep = len(parts) - (2 if _ends_with_year_month_dirs(parts) else 3)
    return _SEPARATOR.join(parts[:keep])


_TRIMMERS: tuple[Callable[[str], str | None], ...] = (
    _dropping_last_part(_is_date_directory),
    _dropping_last_part(_is_key_value_directory),
    _trim_date_directories,
    _dropping_last_part(_is_year_month_directory),
)


def trim_dataset_name(name: str) -> str:
    """``/events/dt=2024-01-01`` → ``/events``; ``logs/2024-01-02`` → ``logs``."""
    trimming = True
    while trimming:
        trimming = False
        for trimmer in _TRIMMERS:
            trimmed = trimmer(name)
            if trimmed is not None:
                name, trimming = trimmed, True
    return name
