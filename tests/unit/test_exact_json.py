"""exact_json keeps every number the client sent and accepts exactly what orjson accepts."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.validation.exact_json import JSONDecodeError, _has_big_int, dumps, loads, too_deep

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**300), max_value=10**300)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, derandomize=True, database=None)
@given(values)
def test_any_json_value_round_trips_exactly(value):
    sent = json.dumps(value, ensure_ascii=False).encode()
    parsed = loads(sent)
    assert parsed == value
    assert json.loads(dumps(parsed)) == value


def test_integers_beyond_64_bits_stay_integers_and_small_bodies_stay_on_orjson():
    assert loads(b'{"n": 18446744073709551616}') == {"n": 2**64}
    assert dumps({"n": -(2**63) - 1}) == b'{"n":-9223372036854775809}'
    assert dumps({"n": 2**64 - 1}) == orjson.dumps({"n": 2**64 - 1})


BIG = b"123456789012345678901234567890"


@pytest.mark.parametrize("digits", [308, 309, 310, 400, 4300])
def test_integers_past_a_doubles_range_are_kept_exactly(digits):
    """orjson refuses a body with an integer past a double's range, from 309 digits
    ("number is infinity when parsed as double"): seen failing for 309 digits and more
    before the syntax check made long runs of digits ``0``."""
    sent = b'{"n": -' + b"9" * digits + b', "m": [' + BIG + b"]}"
    value = loads(sent)
    assert value["n"] == -int("9" * digits) and isinstance(value["n"], int)
    assert dumps(value) == sent.replace(b" ", b"")


@pytest.mark.parametrize(
    "body",
    [
        b"[NaN, " + BIG + b"]",  # the standard library alone would accept these two
        b"[-Infinity, " + BIG + b"]",
        b'["\\ud800", ' + BIG + b"]",
        b"[1e400, " + BIG + b"]",
        b"{'a': " + BIG + b"}",
        b'["\xff", ' + BIG + b"]",
        b"[1" + b"1" * 400 + b".5]",  # a double past its range: infinite
        b"[" + b"1" * 4301 + b"]",  # past MAX_INTEGER_DIGITS
    ],
)
def test_what_orjson_refuses_is_refused_even_with_big_integers(body):
    with pytest.raises(JSONDecodeError):
        loads(body)


def test_nothing_recurses_on_client_data_a_thousand_levels_deep():
    deep: object = 2**70
    for _ in range(1000):
        deep = {"k/~": [deep]}
    # The parser takes up to 1,024 levels: no RecursionError when asked about them.
    assert _has_big_int(deep)
    assert too_deep(deep, 2000) is None
    # Levels: the outer object 1, its array 2, the object in it 3, that one's array 4.
    assert too_deep(deep, 3) == "/k~1~0/0/k~1~0"
    assert too_deep([1, {"a": [[]]}], 2) == "/1/a"
