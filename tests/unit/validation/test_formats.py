"""The uri / date-time / uuid checks agree with the reference format checkers."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from proxy.validation import EventValidator
from proxy.validation.formats import is_date_time, is_uri
from tests.unit.validation.spec_oracle import oracle_missing, valid_run_event

URIS = [
    "http://123",
    "urn:x",
    "file:///in",
    "s3://bucket/key",
    "s3://b/p q",
    "http://e.com/a%zz",
    "http://e.com/a%41",
    "mailto:a@b",
    "http://[::1]:8080/",
    "http://host:port",
    "http://例え.jp",
    "1a:b",
    "http://a/b?c#d#e",
    "http://a/{x}",
    "kafka://host:9092",
    "postgres://h:5432",
    " http://a",
    "spark",
    "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
]
DATE_TIMES = [
    "2024-05-01T10:00:00Z",
    "2024-05-01t10:00:00z",
    "2024-05-01T10:00:00.123456+01:00",
    "2024-05-01T24:00:00Z",
    "2024-05-01 10:00:00Z",
    "2024-05-01T10:00:00",
    "2024-13-01T10:00:00Z",
    "2023-02-29T10:00:00Z",
    "2024-02-29T10:00:00Z",
    "2024-05-01T10:00:00+0100",
    "2024-05-01",
    "\uff12\uff10\uff12\uff14-05-01T10:00:00Z",  # full-width digits
]


@pytest.fixture(scope="module")
def checker() -> FormatChecker:
    checker = Draft202012Validator.FORMAT_CHECKER
    if not {"date-time", "uri"} <= set(checker.checkers):
        oracle_missing(
            "jsonschema format checkers missing: pip install 'jsonschema[format-nongpl]'"
        )
    return checker


@pytest.mark.parametrize("value", URIS)
def test_uri_check_agrees_with_reference(value: str, checker: FormatChecker) -> None:
    assert is_uri(value) == checker.conforms(value, "uri")


@pytest.mark.parametrize("value", DATE_TIMES)
def test_date_time_check_agrees_with_reference(value: str, checker: FormatChecker) -> None:
    assert is_date_time(value) == checker.conforms(value, "date-time")


def test_trailing_newline_is_not_part_of_a_uri_or_date_time() -> None:
    # Stricter than the reference checkers, whose regexes end in a newline-tolerant "$".
    assert not is_uri("http://a\n")
    assert not is_date_time("2024-05-01T10:00:00Z\n")


@pytest.mark.parametrize("value", URIS)
def test_core_and_facet_uri_checks_agree(value: str, validator: EventValidator) -> None:
    event = valid_run_event()
    event["producer"] = value
    event["run"]["facets"]["x"] = {"_producer": value, "_schemaURL": "https://a.b/c.json"}
    pointers = {issue.pointer for issue in validator.validate(event)}
    expected = set() if is_uri(value) else {"/producer", "/run/facets/x/_producer"}
    assert pointers == expected
