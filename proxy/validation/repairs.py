"""Named repairs for the small spec breaks that real clients make, applied only on failure.

Refusing these events is correct per the spec and loses them (clients do not retry a 4xx):
the client drops a 400, and openlineage-dbt's ABORT event never reaches anyone. So, unless
``validation.mode: strict``, the pipeline asks :class:`EventRepairer` for a repaired copy
of an event that failed validation; it gives one only when *every* issue sits at a
pointer a enabled repair knows how to fix, and the pipeline then validates the copy
again. Valid events never get here, so repairs cost nothing on the hot path.

The repairs (each can be switched off in ``validation.repairs``):

``naive_date_time``
    A date-time without a UTC offset (``datetime.now().isoformat()``) is read in the
    zone ``validation.naive_time_zone`` names (by default UTC), or the one named for its
    producer in ``validation.naive_time_zones_by_producer``, and that zone's offset at
    that time is appended: ``2026-11-23T10:00:00.123456`` → ``…123456Z`` in UTC,
    ``…123456+01:00`` in Europe/Berlin. The digits sent are kept.
``date_only_nominal_time``
    A ``nominalStartTime``/``nominalEndTime`` that is only a date is midnight UTC:
    ``2020-01-01`` → ``2020-01-01T00:00:00Z``.
``schemeless_datasource_uri``
    A ``dataSource.uri`` without a scheme: an absolute path becomes a ``file://`` URI;
    a path relative to the producer's working directory (``./data/x.csv``, as Apache
    Hamilton sends) becomes a relative ``file:`` URI (``file:data/x.csv``: RFC 3986's
    rootless path, since the proxy cannot know that directory); otherwise the dataset's
    namespace is used when it is a URI, the bare ``file`` that openlineage-spark writes
    for local files becomes ``file:///``, and in namespace ``file`` any other value with a
    ``/`` in it is a relative path too (``data/x.csv``). Elsewhere such a value stays
    refused: ``raw/x.csv`` in namespace ``warehouse`` could be a path anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, get_args
from urllib.parse import quote
from zoneinfo import ZoneInfo

import orjson

from proxy.openlineage.repaired import Repair, RepairedEvent
from proxy.validation.formats import DATE_TIME_MESSAGE, URI_MESSAGE, is_uri
from proxy.validation.issues import ValidationIssue
from proxy.validation.validator import EventValidator

__all__ = ["REPAIR_NAMES", "EventRepairer", "NaiveTimeZones", "RepairName", "validate_or_repair"]

RepairName = Literal["naive_date_time", "date_only_nominal_time", "schemeless_datasource_uri"]
REPAIR_NAMES: tuple[RepairName, ...] = get_args(RepairName)

_NAIVE_DATE_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2}(?:\.\d+)?)", re.ASCII)
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_NOMINAL_TIMES = ("nominalStartTime", "nominalEndTime")
_DATA_SOURCE_URI = ["facets", "dataSource", "uri"]
# RFC 3986 characters a path may keep as they are; everything else is percent-encoded.
_PATH_SAFE = "/!$&'()*+,;=:@-._~"

# A fix reads the value and the event (for context such as the dataset's namespace) and
# returns the repaired value, or None when it does not apply.
_Fix = Callable[[str, list[str], dict[str, Any]], str | None]


class NaiveTimeZones:
    """The zone a naive date-time of an event is read in: the one named for the longest
    prefix of its ``producer`` in ``by_producer``, else ``default``."""

    def __init__(self, default: str = "UTC", by_producer: Mapping[str, str] | None = None):
        self.default = ZoneInfo(default)
        # Longest prefix first, so that the first match is the most specific one.
        self.by_producer = sorted(
            ((prefix, ZoneInfo(zone)) for prefix, zone in (by_producer or {}).items()),
            key=lambda item: -len(item[0]),
        )

    def zone_of(self, event: dict[str, Any]) -> ZoneInfo:
        producer = event.get("producer")
        if isinstance(producer, str):
            for prefix, zone in self.by_producer:
                if producer.startswith(prefix):
                    return zone
        return self.default

    def naive_date_time(self, value: str, tokens: list[str], event: dict[str, Any]) -> str | None:
        """``value`` with the offset of its zone at that time appended (``Z`` for UTC).
        A wall time that occurs twice (clocks going back) is taken at its first
        occurrence, one that does not occur (clocks going forward) with the offset
        before the change, as :mod:`zoneinfo` does with ``fold=0``."""
        match = _NAIVE_DATE_TIME.fullmatch(value)
        if not match:
            return None
        zone = self.zone_of(event)
        local = f"{match[1]}T{match[2]}"
        try:
            offset = datetime.fromisoformat(local).replace(tzinfo=zone).utcoffset()
        except ValueError:  # no such day or time: the validator refuses it again
            return f"{local}Z"
        if not offset:
            return f"{local}Z"
        minutes = int(offset.total_seconds()) // 60
        sign = "+" if minutes >= 0 else "-"
        hours, minutes = divmod(abs(minutes), 60)
        return f"{local}{sign}{hours:02d}:{minutes:02d}"


def _date_only_nominal_time(value: str, tokens: list[str], event: dict[str, Any]) -> str | None:
    if tokens[-1] in _NOMINAL_TIMES and _DATE_ONLY.fullmatch(value):
        return f"{value}T00:00:00Z"
    return None


def _schemeless_datasource_uri(value: str, tokens: list[str], event: dict[str, Any]) -> str | None:
    if tokens[-3:] != _DATA_SOURCE_URI or ":" in value:
        return None
    if value.startswith("/"):
        return "file://" + quote(value, safe=_PATH_SAFE)
    if value.startswith(("./", "../")):
        return _relative_file_uri(value)
    dataset = _resolve(event, tokens[:-3])
    namespace = dataset.get("namespace") if isinstance(dataset, dict) else None
    if isinstance(namespace, str) and is_uri(namespace):
        return namespace
    if value == "file":
        return "file:///"
    if namespace == "file" and "/" in value:
        return _relative_file_uri(value)
    return None


def _relative_file_uri(path: str) -> str | None:
    """``file:`` + the path without its leading ``./`` (a path-rootless URI is relative
    to wherever the producer ran, as the path was); None for a path that is only ``./``."""
    while path.startswith("./"):
        path = path[2:].lstrip("/")
    return "file:" + quote(path, safe=_PATH_SAFE) if path else None


def _fixes(zones: NaiveTimeZones) -> dict[str, tuple[tuple[RepairName, _Fix], ...]]:
    """Which repairs may answer an issue with this message, in the order they are tried."""
    return {
        DATE_TIME_MESSAGE: (
            ("naive_date_time", zones.naive_date_time),
            ("date_only_nominal_time", _date_only_nominal_time),
        ),
        URI_MESSAGE: (("schemeless_datasource_uri", _schemeless_datasource_uri),),
    }


def _tokens(pointer: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _resolve(node: Any, tokens: Sequence[str]) -> Any:
    for token in tokens:
        if isinstance(node, dict):
            node = node.get(token)
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


class EventRepairer:
    """Repaired copies of invalid events, using only the repairs it was built with."""

    def __init__(self, enabled: Iterable[RepairName], zones: NaiveTimeZones | None = None) -> None:
        wanted = set(enabled)
        self._fixes = {
            message: tuple((name, fix) for name, fix in fixes if name in wanted)
            for message, fixes in _fixes(zones or NaiveTimeZones()).items()
        }
        self.enabled = tuple(name for name in REPAIR_NAMES if name in wanted)

    def repair(
        self, event: dict[str, Any], issues: Sequence[ValidationIssue]
    ) -> RepairedEvent | None:
        """A copy of ``event`` with every issue repaired, or None if one is not repairable.

        The copy still has to be validated: a repair makes a value well-formed, the
        validator decides whether the event is.
        """
        if not self.enabled or any(not self._fixes.get(i.message) for i in issues):
            return None
        copy: dict[str, Any] = orjson.loads(orjson.dumps(event))
        repairs: list[Repair] = []
        for issue in issues:
            if any(r.pointer == issue.pointer for r in repairs):
                continue  # two issues at one value: repaired once
            tokens = _tokens(issue.pointer)
            if not tokens:
                return None
            parent = _resolve(copy, tokens[:-1])
            key: Any = tokens[-1]
            if isinstance(parent, list) and key.isdigit() and int(key) < len(parent):
                key = int(key)
            elif not isinstance(parent, dict):
                return None
            value = parent[key] if isinstance(parent, list) else parent.get(key)
            if not isinstance(value, str):
                return None
            for name, fix in self._fixes[issue.message]:
                repaired = fix(value, tokens, copy)
                if repaired is not None:
                    parent[key] = repaired
                    repairs.append(Repair(name, issue.pointer, value, repaired))
                    break
            else:
                return None
        return RepairedEvent(copy, tuple(repairs))


def validate_or_repair(
    validator: EventValidator, repairer: EventRepairer, event: Any
) -> tuple[Any, list[ValidationIssue]]:
    """``(event, [])`` when valid, ``(repaired copy, [])`` when repaired and then valid,
    else ``(event, issues)`` — the original's issues, since they are what the spec
    objects to. What the proxy and ``rules test`` both do with an event."""
    issues = validator.validate(event)
    if not issues:
        return event, issues
    repaired = repairer.repair(event, issues)
    if repaired is None or validator.validate(repaired):
        return event, issues
    return repaired, []
