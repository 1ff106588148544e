"""Benchmark: routing with 100 rules against routing with 1 rule, same events.

    .venv/bin/python bench/routing_rules.py [--events 2000] [--rounds 7]

Prints one JSON document. Every figure is a ratio taken in the same run (absolute figures drift):
``ratio`` = events/s with 100 rules ÷ events/s with 1 rule (the issue asks ≥ 0.9).

Scenarios, each over the same event set (2.5 KB RunEvents spread over 100 namespaces):

- ``one_rule``: one rule sends every run event to one destination (the reference);
- ``hundred_namespace_rules``: one rule per team namespace, each to its own
  destination, plus a catch-all (the per-team-topics case; served by the namespace index);
- ``hundred_job_rules``: 100 rules on job name (exact) and producer (glob), also
  served by the routing-key index;
- ``hundred_field_rules``: 100 rules comparing one field path to 100 values; field
  equalities join the routing key too (none matches here, the default applies);
- ``hundred_facet_rules``: 100 ``has_facets`` rules, which no index narrows: the worst
  case, where every event runs all 100 predicates (none matches, the default applies).

Two measurements per scenario: ``route`` (``Ruleset.route`` alone) and ``proxy_cpu``
(what the proxy does per event on its CPU: validate, route, serialize), because the
issue's target is the proxy's throughput, of which routing is one part.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proxy.validation import EventValidator
from routing_rules.compiler import compile_rules
from routing_rules.loader import load_rules_file
from routing_rules.ruleset import Ruleset
from routing_rules.stats import RoutingStats
from tests.support.sample_events import rich_run_event

TEAMS = 100


def _destinations(count: int) -> str:
    return "destinations:\n" + "".join(
        f"  t{i:03d}: {{kind: kafka, topic: lineage.t{i:03d}}}\n" for i in range(count)
    )


ONE_RULE = (
    "version: 1\n"
    + _destinations(1)
    + "rules:\n  - {name: all, match: {kind: run}, to: [t000]}\ndefault: {to: [t000]}\n"
)

HUNDRED_NAMESPACE_RULES = (
    "version: 1\n"
    + _destinations(TEAMS)
    + "rules:\n"
    + "".join(
        f"  - {{name: team-{i:03d}, match: {{job_namespace: team-{i:03d}, kind: run}}, "
        f"to: [t{i:03d}]}}\n"
        for i in range(TEAMS - 1)
    )
    + "  - {name: catch-all, match: {kind: run}, to: [t099]}\n"
    + "default: {to: [t000]}\n"
)

HUNDRED_JOB_RULES = (
    "version: 1\n"
    + _destinations(TEAMS)
    + "rules:\n"
    + "".join(
        f"  - {{name: job-{i:03d}, match: {{job_name: 'etl.job-{i:03d}', "
        f"producer: 'https://*'}}, to: [t{i:03d}]}}\n"
        for i in range(TEAMS)
    )
    + "default: {to: [t000]}\n"
)

HUNDRED_FIELD_RULES = (
    "version: 1\n"
    + _destinations(TEAMS)
    + "rules:\n"
    + "".join(
        f"  - {{name: field-{i:03d}, match: {{fields: "
        f"{{run.facets.nominalTime.nominalStartTime: '2026-11-{1 + i % 28:02d}T00:00:{i:02d}Z'}}}},"
        f" to: [t{i:03d}]}}\n"
        for i in range(TEAMS)
    )
    + "default: {to: [t000]}\n"
)

HUNDRED_FACET_RULES = (
    "version: 1\n"
    + _destinations(TEAMS)
    + "rules:\n"
    + "".join(
        f"  - {{name: facet-{i:03d}, match: {{has_facets: [run.custom_{i:03d}]}}, "
        f"to: [t{i:03d}]}}\n"
        for i in range(TEAMS)
    )
    + "default: {to: [t000]}\n"
)

SCENARIOS = {
    "one_rule": ONE_RULE,
    "hundred_namespace_rules": HUNDRED_NAMESPACE_RULES,
    "hundred_job_rules": HUNDRED_JOB_RULES,
    "hundred_field_rules": HUNDRED_FIELD_RULES,
    "hundred_facet_rules": HUNDRED_FACET_RULES,
}


def _events(count: int) -> list[dict[str, Any]]:
    return [
        rich_run_event(namespace=f"team-{i % TEAMS:03d}", name=f"etl.job-{(i * 7) % TEAMS:03d}")
        for i in range(count)
    ]


def _ruleset(text: str) -> Ruleset[str]:
    rules = load_rules_file("bench.yaml", text)
    return compile_rules(rules, lambda name: name, RoutingStats())


def _events_per_second(work: Callable[[], None], events: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return events / best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2000, help="events per round")
    parser.add_argument("--rounds", type=int, default=7, help="rounds; the best one counts")
    args = parser.parse_args(argv)

    events = _events(args.events)
    validator = EventValidator()
    rulesets = {name: _ruleset(text) for name, text in SCENARIOS.items()}

    def route_only(ruleset: Ruleset[str]) -> Callable[[], None]:
        def work() -> None:
            for event in events:
                ruleset.route(event)

        return work

    def proxy_cpu(ruleset: Ruleset[str]) -> Callable[[], None]:
        def work() -> None:
            for event in events:
                if not validator.validate(event):
                    orjson.dumps(ruleset.route(event).event)

        return work

    results: dict[str, dict[str, float]] = {}
    print(f"benchmarking {len(SCENARIOS)} scenarios x 2 measurements ...", file=sys.stderr)
    for measurement, make in (("route", route_only), ("proxy_cpu", proxy_cpu)):
        for ruleset in rulesets.values():
            make(ruleset)()  # warm up: namespace memo, caches
        # Interleave scenarios round by round so machine noise hits them alike.
        best = {name: 0.0 for name in rulesets}
        for _ in range(args.rounds):
            for name, ruleset in rulesets.items():
                rate = _events_per_second(make(ruleset), len(events), 1)
                best[name] = max(best[name], rate)
        results[measurement] = best

    report = {
        "benchmark": "routing_rules",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "events_per_round": len(events),
        "rounds": args.rounds,
        "events_per_second": {m: {n: round(v) for n, v in r.items()} for m, r in results.items()},
        "ratio_vs_one_rule": {
            m: {n: round(v / r["one_rule"], 3) for n, v in r.items() if n != "one_rule"}
            for m, r in results.items()
        },
        "target": "hundred rules keep >= 0.9 of one-rule throughput",
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
