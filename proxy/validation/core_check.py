"""A fast yes for the core event shape: plain Python checks in front of the core models.

The models in :mod:`proxy.validation.core` are the authority: they say what is wrong and
where. But nearly every event is valid, and on the hot path pydantic's strict TypedDict
validation builds a copy of the event to throw away. :func:`core_is_valid` answers only
"surely valid": every check here is at least as strict as the model's (exact ``str``,
``dict`` and ``list`` types where strict pydantic would also accept subclasses; the same
patterns and date-time rule from :mod:`proxy.validation.formats`), so a True never lets
through what the model refuses, and a False sends the event to the model for its issues.
``tests/unit/validation/test_core_check.py`` holds the two side by side on mutations of
every core field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args, get_type_hints

from proxy.openlineage.kinds import EventKind
from proxy.validation.core import RunEvent
from proxy.validation.formats import is_date_time, is_uuid

__all__ = ["core_is_valid"]

# The model's own eventType values, not a second list of them.
_EVENT_TYPES = frozenset(get_args(get_type_hints(RunEvent)["eventType"]))
_MISSING = object()


def core_is_valid(event: dict[str, Any], kind: EventKind, is_uri: Callable[[str], bool]) -> bool:
    """True only when the core model of ``kind`` accepts ``event`` (facets aside).
    ``is_uri``: :func:`proxy.validation.formats.is_uri`, or the validator's cached face
    of it (producers and schema URLs repeat event after event)."""
    if not _date_time(event.get("eventTime")):
        return False
    for field in ("producer", "schemaURL"):
        value = event.get(field)
        if type(value) is not str or not is_uri(value):
            return False
    if kind is EventKind.DATASET:
        return _named(event.get("dataset"))
    if kind is EventKind.RUN:
        event_type = event.get("eventType", _MISSING)
        if event_type is not _MISSING and (
            type(event_type) is not str or event_type not in _EVENT_TYPES
        ):
            return False
        run = event.get("run")
        if type(run) is not dict:
            return False
        run_id = run.get("runId")
        if type(run_id) is not str or not is_uuid(run_id):
            return False
    return _named(event.get("job")) and _datasets(event, "inputs") and _datasets(event, "outputs")


def _named(value: Any) -> bool:
    """A job or dataset: an object with string ``namespace`` and ``name``."""
    return (
        type(value) is dict
        and type(value.get("namespace")) is str
        and type(value.get("name")) is str
    )


def _datasets(event: dict[str, Any], field: str) -> bool:
    datasets = event.get(field, _MISSING)
    if datasets is _MISSING:
        return True
    return type(datasets) is list and all(_named(dataset) for dataset in datasets)


def _date_time(value: Any) -> bool:
    return type(value) is str and is_date_time(value)
