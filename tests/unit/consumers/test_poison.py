"""Poison (not a JSON object) is told apart the same way with and without building the event."""

from __future__ import annotations

import orjson
import pytest

from consumers.poison import UNREAD, checked_event, parse_event
from tests.support.sample_events import rich_run_event

POISON = [
    b"",
    b"not json",
    b"[1, 2]",
    b'"a string"',
    b"42",
    b"null",
    b'{"a": 1',
    b'{"a": 1}trailing',
    b'{"a": 1,}',
    b'{"a": NaN}',
    b'{"a": "\xff\xfe"}',
]


@pytest.mark.parametrize("value", POISON)
def test_poison_is_refused_whether_or_not_the_event_is_built(value):
    assert parse_event(value) is None
    assert checked_event(value) is None


@pytest.mark.parametrize(
    "value",
    [orjson.dumps(rich_run_event()), b"{}", '{"job": {"name": "déjà vu ✓"}}'.encode()],
)
def test_a_json_object_is_accepted_built_or_only_checked(value):
    assert parse_event(value) == orjson.loads(value)
    assert checked_event(value) is UNREAD
