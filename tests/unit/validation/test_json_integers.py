"""Integer fields take what JSON Schema calls an integer: ``1000.0`` and ``1E3`` too.

The official schemas (the oracle) accept any number with a zero fractional part where
they say ``"type": "integer"``; the validator agrees, on the bytes a client sends.
"""

from __future__ import annotations

import orjson
import pytest

from proxy.validation import EventValidator
from proxy.validation.exact_json import dumps, loads
from tests.unit.validation.spec_oracle import Oracle, reference_run_event


def _with_row_count(text: bytes) -> bytes:
    """The reference event as JSON text whose outputStatistics rowCount is ``text``."""
    body = orjson.dumps(reference_run_event())
    assert body.count(b'"rowCount":1000') == 1
    return body.replace(b'"rowCount":1000', b'"rowCount":' + text)


@pytest.mark.parametrize("text", [b"1000", b"1000.0", b"1E3", b"1e3", b"1.0e3", b"-0.0"])
def test_whole_numbers_are_integers_as_json_schema_says(text: bytes, oracle: Oracle) -> None:
    event = loads(_with_row_count(text))
    assert oracle.errors(event) == []
    assert EventValidator().validate(event) == []


@pytest.mark.parametrize("text", [b"1000.5", b"true", b'"1000"', b"1E-3"])
def test_other_values_are_not_integers(text: bytes, oracle: Oracle) -> None:
    event = loads(_with_row_count(text))
    assert oracle.errors(event) != []
    [issue] = EventValidator().validate(event)
    assert issue.pointer == "/outputs/0/outputFacets/outputStatistics/rowCount"


def test_what_is_stored_for_a_whole_float_is_stated_in_docs_repairs() -> None:
    # docs/clients/validation.md "Numbers and the JSON text": the value is kept, its spelling may
    # change.
    assert dumps(loads(_with_row_count(b"1E3"))).count(b'"rowCount":1000.0') == 1
    assert dumps(loads(_with_row_count(b"1000.0"))).count(b'"rowCount":1000.0') == 1
