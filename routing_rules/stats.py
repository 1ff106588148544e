"""Per-rule counters, cheap to bump on the hot path, exposed to Prometheus on scrape.

The router increments plain integers (no lock, no label lookup per event; the proxy
routes on one event loop thread); :class:`RoutingStats` is also a Prometheus collector
that turns them into ``lineage_proxy_routed_events_total{rule,outcome}`` when
``/metrics`` is read. Counters are kept by rule name, so they survive a reload.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["DEFAULT_RULE", "RoutingStats", "RuleStats"]

# The name the default route is counted under.
DEFAULT_RULE = "(default)"


class RuleStats:
    """What one rule did: matched (and acted), dropped on purpose, throttled."""

    __slots__ = ("dropped", "matched", "throttled")

    def __init__(self) -> None:
        self.matched = 0
        self.dropped = 0
        self.throttled = 0


class RoutingStats(Collector):
    def __init__(self) -> None:
        self._rules: dict[str, RuleStats] = {}
        self.reloads: dict[str, int] = {"success": 0, "failure": 0}
        # (the last load worked, its Unix time); None before the first load.
        self.last_load: tuple[bool, float] | None = None

    def count_reload(self, result: str) -> None:
        self.reloads[result] += 1
        self.loaded(result == "success")

    def loaded(self, ok: bool) -> None:
        """Note the outcome of loading the rules file (at start, or a reload) and when."""
        self.last_load = (ok, time.time())

    def for_rule(self, name: str) -> RuleStats:
        return self._rules.setdefault(name, RuleStats())

    def snapshot(self) -> dict[str, dict[str, int]]:
        return {
            name: {"matched": s.matched, "dropped": s.dropped, "throttled": s.throttled}
            for name, s in self._rules.items()
        }

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "lineage_proxy_routed_events",
            "Events per routing rule and outcome: matched (the rule applied), dropped "
            "(drop: true, or the default route dropping), throttled (RUNNING throttle). "
            f'rule="{DEFAULT_RULE}" counts what no rule sent anywhere.',
            labels=["rule", "outcome"],
        )
        for name, stats in self._rules.items():
            family.add_metric([name, "matched"], stats.matched)
            family.add_metric([name, "dropped"], stats.dropped)
            family.add_metric([name, "throttled"], stats.throttled)
        yield family
        reloads = CounterMetricFamily(
            "lineage_proxy_rules_reloads",
            "Reloads of the rules file by result (failure: the old rules kept serving).",
            labels=["result"],
        )
        for result, count in self.reloads.items():
            reloads.add_metric([result], count)
        yield reloads
        if self.last_load is not None:
            ok, when = self.last_load
            yield GaugeMetricFamily(
                "lineage_proxy_rules_last_reload_success",
                "1 if the last load of the rules file (at start or a reload) worked, 0 if "
                "it was refused and the previous rules kept serving.",
                value=1 if ok else 0,
            )
            yield GaugeMetricFamily(
                "lineage_proxy_rules_last_reload_timestamp_seconds",
                "Unix time of the last load of the rules file, whatever its outcome.",
                value=when,
            )
