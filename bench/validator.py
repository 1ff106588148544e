"""Benchmark: EventValidator on the ~2.5 KB reference RunEvent (7 standard facets).

    .venv/bin/python bench/validator.py

Prints JSON: event size, µs/event for orjson parse alone and for validate(), and the
ratio of the two (benchmarks report ratios measured in the same run; absolute figures on
shared machines drift).
"""

from __future__ import annotations

import json
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proxy.validation import EventValidator
from tests.unit.validation.spec_oracle import reference_run_event


def main() -> None:
    body = orjson.dumps(reference_run_event())
    event = orjson.loads(body)
    validator = EventValidator()
    assert validator.validate(event) == [], validator.validate(event)
    rounds = 20_000

    def best(statement: Callable[[], object]) -> float:
        runs = timeit.repeat(statement, number=rounds, repeat=5)
        return min(runs) / rounds * 1e6

    parse_us = best(lambda: orjson.loads(body))
    validate_us = best(lambda: validator.validate(event))
    print(
        json.dumps(
            {
                "event_bytes": len(body),
                "facets": 7,
                "orjson_parse_us": round(parse_us, 2),
                "validate_us": round(validate_us, 2),
                "validate_over_parse": round(validate_us / parse_us, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
