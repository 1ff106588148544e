"""Benchmark: what repairs cost in the pipeline's check (validate → repair → authorize).

Run: ``.venv/bin/python bench/repairs.py``. Prints JSON: microseconds per ``check()`` for
the reference event (valid) with repairs on and off, and for the same event with a naive
``eventTime`` that gets repaired. Rounds alternate on/off so machine noise hits both; the
figure to compare is ``valid_on_vs_off`` (≈ 1: repairs only run after validation failed).
``bench/http_ingest.py --scenarios repairs`` measures the same over HTTP.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from proxy.auth.principal import ANONYMOUS  # noqa: E402
from proxy.ingest.pipeline import Accepted, BestEffortQueue, EventPipeline  # noqa: E402
from proxy.metrics.process import ProxyMetrics  # noqa: E402
from proxy.validation import EventValidator  # noqa: E402
from proxy.validation.repairs import REPAIR_NAMES, EventRepairer, RepairName  # noqa: E402
from tests.support.sample_events import rich_run_event  # noqa: E402

ROUNDS = 7
CALLS = 2000


def _pipeline(repairs: tuple[RepairName, ...]) -> EventPipeline:
    metrics = ProxyMetrics()
    return EventPipeline(
        EventValidator(),
        router=None,  # type: ignore[arg-type]  # check() never routes
        metrics=metrics,
        best_effort=BestEffortQueue(1, 1, metrics),
        repairer=EventRepairer(repairs),
    )


def _micros(pipeline: EventPipeline, event: dict[str, Any]) -> float:
    assert isinstance(pipeline.check(event, ANONYMOUS), Accepted)
    started = time.perf_counter()
    for _ in range(CALLS):
        pipeline.check(event, ANONYMOUS)
    return (time.perf_counter() - started) / CALLS * 1e6


def main() -> int:
    on, off = _pipeline(REPAIR_NAMES), _pipeline(())
    valid = rich_run_event()
    naive = {**valid, "eventTime": "2026-11-23T10:00:00.123"}
    samples: dict[str, list[float]] = {"valid_on": [], "valid_off": [], "repaired": []}
    for _ in range(ROUNDS):
        samples["valid_off"].append(_micros(off, valid))
        samples["valid_on"].append(_micros(on, valid))
        samples["repaired"].append(_micros(on, naive))
    us = {name: round(median(values), 1) for name, values in samples.items()}
    report = {
        "benchmark": "repairs",
        "calls_per_round": CALLS,
        "rounds": ROUNDS,
        "check_us_median": us,
        "ratios": {
            "valid_on_vs_off": round(us["valid_on"] / us["valid_off"], 3),
            "repaired_vs_valid": round(us["repaired"] / us["valid_on"], 3),
        },
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
