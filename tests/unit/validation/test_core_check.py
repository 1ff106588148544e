"""The fast core check never says yes where the core model says no.

``core_is_valid`` lets valid events skip pydantic; a True for an event the model refuses
would let an invalid event through. Every core field of every kind is mutated into
wrong types and edge values, and wherever the fast check says yes the model must agree.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from proxy.openlineage.kinds import EventKind, event_kind
from proxy.validation.core import EVENT_MODELS
from proxy.validation.core_check import core_is_valid
from proxy.validation.formats import is_uri
from tests.support.sample_events import dataset_event, job_event, rich_run_event

_DELETE = object()


class _Text(str):
    """A str subclass: strict pydantic may judge it apart from str."""


RUN_ID = "3f5e83fa-3480-44ff-99c5-ff943904e5e8"
VALUES: list[Any] = [
    _DELETE,
    None,
    0,
    1.5,
    True,
    "",
    "x",
    [],
    {},
    ["x"],
    [{}],
    [{"namespace": "n"}],
    [{"namespace": "n", "name": 1}],
    {"namespace": "n", "name": "x"},
    {"namespace": 1, "name": "x"},
    {"runId": RUN_ID},
    {"runId": RUN_ID.replace("-", "")},
    {"runId": RUN_ID + "\n"},
    {"runId": RUN_ID.upper()},
    {"runId": 5},
    RUN_ID,
    RUN_ID + "\n",
    "START",
    "START\n",
    "start",
    "OTHER",
    "2024-02-29T00:00:00Z",
    "2023-02-29T00:00:00Z",
    "2024-05-01T10:00:00",
    "2024-05-01T10:00:00Z\n",
    "2024-05-01t10:00:00.5+01:00",
    "https://example.com/x",
    "https://example.com/x\n",
    "no scheme",
    "urn:x",
    _Text("https://example.com/x"),
    _Text("2024-05-01T10:00:00Z"),
    _Text("START"),
]
PATHS = [
    ("eventTime",),
    ("producer",),
    ("schemaURL",),
    ("eventType",),
    ("run",),
    ("run", "runId"),
    ("job",),
    ("job", "namespace"),
    ("job", "name"),
    ("inputs",),
    ("inputs", 0),
    ("inputs", 0, "namespace"),
    ("inputs", 0, "name"),
    ("outputs",),
    ("outputs", 0, "name"),
    ("dataset",),
    ("dataset", "namespace"),
    ("dataset", "name"),
]


def _kinds() -> list[dict[str, Any]]:
    return [rich_run_event(), job_event(), dataset_event()]


def _mutations() -> Iterator[dict[str, Any]]:
    for base in _kinds():
        for path in PATHS:
            for value in VALUES:
                event = copy.deepcopy(base)
                owner: Any = event
                try:
                    for step in path[:-1]:
                        owner = owner[step]
                    if value is _DELETE:
                        del owner[path[-1]]
                    else:
                        owner[path[-1]] = copy.deepcopy(value)
                except (KeyError, IndexError, TypeError):
                    continue  # this kind has no such field
                yield event


def _model_accepts(event: dict[str, Any], kind: EventKind) -> bool:
    try:
        TypeAdapter(EVENT_MODELS[kind]).validate_python(event)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("event", _kinds(), ids=["run", "job", "dataset"])
def test_valid_events_of_every_kind_take_the_fast_path(event: dict[str, Any]) -> None:
    kind = event_kind(event)
    assert kind is not None
    assert core_is_valid(event, kind, is_uri)
    assert _model_accepts(event, kind)


def test_the_fast_check_never_accepts_what_the_model_refuses() -> None:
    judged = fast_yes = refused = 0
    for event in _mutations():
        kind = event_kind(event)
        if kind is None:
            continue
        judged += 1
        accepted = _model_accepts(event, kind)
        refused += not accepted
        if core_is_valid(event, kind, is_uri):
            fast_yes += 1
            assert accepted, f"fast check said valid, the model refuses: {event}"
    # The table really exercises both answers.
    assert judged > 1000
    assert refused > 500
    assert fast_yes > 100
