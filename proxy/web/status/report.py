"""The JSON the status page polls (``GET /api/v1/status``; shape in docs/operate/status-page.md).

Built from every worker's :class:`~proxy.web.status.parts.WorkerPart` (one with a single
process): registry readings (:mod:`.rates`) summed, destination health
(:mod:`proxy.web.readiness`) at its worst, the last refusals (:mod:`.rejections`) merged.
Nothing here keeps figures of its own: a figure on the page is the sum over workers of
the number ``/metrics`` shows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from proxy import __version__
from proxy.destinations import Destination
from proxy.openlineage.times import utc_timestamp
from proxy.web.readiness import Health, overall_status
from proxy.web.status.parts import WorkerPart, merged_health, merged_readings, newest_rejections
from proxy.web.status.rates import Reading

__all__ = ["status_report"]

_ACCEPTED = "lineage_proxy_events_accepted_total"
_REJECTED = "lineage_proxy_events_rejected_total"
_REPAIRED = "lineage_proxy_events_repaired_total"
_ROUTED = "lineage_proxy_routed_events_total"
_DELIVERY = "lineage_proxy_delivery_seconds"
_FAILURES = "lineage_proxy_delivery_failures_total"
_SPOOLED = "lineage_proxy_events_spooled_total"
_CONSUMER_LAG = "lineage_consumer_lag"
_CONSUMER_CIRCUIT = "lineage_consumer_circuit_open"
_CONSUMER_DELIVERED = "lineage_consumer_delivered_total"
_CONSUMER_ASSIGNED = "lineage_consumer_assigned_partitions"
_CONSUMER_UNREACHABLE = "lineage_consumer_kafka_unreachable"


def _quantile(growth: Reading, destination: str, q: float) -> float | None:
    """Prometheus' histogram_quantile over the window: linear within the bucket."""
    buckets = sorted(
        (float(labels["le"]), count)
        for labels, count in growth.samples(_DELIVERY + "_bucket")
        if labels.get("destination") == destination
    )
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if math.isinf(upper):
                return lower
            return lower + (upper - lower) * (rank - below) / max(count - below, 1e-9)
        lower, below = upper, count
    return lower


def _events(now: Reading, growth: Reading, per_minute: float) -> dict[str, Any]:
    def figure(name: str) -> dict[str, float]:
        return {"total": now.total(name), "per_minute": round(growth.total(name) * per_minute, 1)}

    rejected = figure(_REJECTED)
    by_reason: dict[str, float] = {}
    for labels, value in now.samples(_REJECTED):
        by_reason[labels["reason"]] = value
    return {
        "accepted": figure(_ACCEPTED),
        "rejected": {**rejected, "by_reason": by_reason},
        "repaired": figure(_REPAIRED),
    }


def _rules(now: Reading, growth: Reading, per_minute: float) -> list[dict[str, Any]]:
    names = list(dict.fromkeys(labels["rule"] for labels, _ in now.samples(_ROUTED)))
    return [
        {
            "name": name,
            "matched": now.total(_ROUTED, rule=name, outcome="matched"),
            "dropped": now.total(_ROUTED, rule=name, outcome="dropped"),
            "throttled": now.total(_ROUTED, rule=name, outcome="throttled"),
            "matched_per_minute": round(
                growth.total(_ROUTED, rule=name, outcome="matched") * per_minute, 1
            ),
        }
        for name in names
    ]


def _destinations(
    destinations: Sequence[Destination],
    health: dict[str, Health],
    now: Reading,
    growth: Reading,
    per_minute: float,
) -> list[dict[str, Any]]:
    """Per destination: health, and what it delivered apart from what it only spooled
    (a spooled event is safe on disk, not yet in Kafka)."""
    report = []
    for destination in destinations:
        name = destination.name
        recent = growth.total(_DELIVERY + "_count", destination=name)
        spooled_recently = growth.total(_SPOOLED, destination=name)
        latency = None
        # Latency of real deliveries: while everything is spooled it says nothing.
        if recent - spooled_recently > 0:
            mean = growth.total(_DELIVERY + "_sum", destination=name) / recent
            p99 = _quantile(growth, name, 0.99)
            latency = {
                "mean": round(mean * 1000, 2),
                "p99": None if p99 is None else round(p99 * 1000, 2),
            }
        state = health[name]
        spooled = now.total(_SPOOLED, destination=name)
        spool = state.details or {}
        report.append(
            {
                "name": name,
                "durable": destination.durable,
                "ready": state.ready,
                # ready, degraded (ready, but something is wrong: problem) or not_ready.
                "state": ("degraded" if state.problem else "ready") if state.ready else "not_ready",
                "problem": state.problem,
                "circuit": state.circuit,
                "delivered": now.total(_DELIVERY + "_count", destination=name) - spooled,
                "delivered_per_minute": round((recent - spooled_recently) * per_minute, 1),
                "spooled": spooled,
                "spooled_per_minute": round(spooled_recently * per_minute, 1),
                "failures": now.total(_FAILURES, destination=name),
                "latency_ms": latency,
                # Which spool holds its events while Kafka does not confirm ("spools").
                "spool": spool.get("directory"),
            }
        )
    return report


def _spools(health: dict[str, Health]) -> list[dict[str, Any]]:
    """Each spool once, with the destinations that share it (one per Kafka cluster)."""
    spools: dict[str, dict[str, Any]] = {}
    for name, state in health.items():
        details = state.details or {}
        directory = details.get("directory")
        if directory is None:
            continue
        entry = spools.setdefault(
            directory,
            {**{k: v for k, v in details.items() if k != "directory"}, "destinations": []},
        )
        entry["directory"] = directory
        entry["destinations"].append(name)
    return list(spools.values())


def _consumers(now: Reading, growth: Reading, per_minute: float) -> list[dict[str, Any]]:
    """In-process consumers whose metrics are registered in the proxy's registry; lag is
    None (unknown) while a consumer holds no partitions."""
    names = list(dict.fromkeys(labels["consumer"] for labels, _ in now.samples(_CONSUMER_LAG)))
    for family in (_CONSUMER_CIRCUIT, _CONSUMER_ASSIGNED):
        names += [
            labels["consumer"]
            for labels, _ in now.samples(family)
            if labels["consumer"] not in names
        ]
    report = []
    for name in names:
        assigned = next(
            (v for labels, v in now.samples(_CONSUMER_ASSIGNED) if labels["consumer"] == name),
            None,
        )
        unreachable = now.total(_CONSUMER_UNREACHABLE, consumer=name) > 0
        circuit_open = now.total(_CONSUMER_CIRCUIT, consumer=name) > 0
        if unreachable:
            state = "kafka unreachable"
        elif assigned == 0:
            state = "no partitions"
        elif circuit_open:
            state = "target down"
        else:
            state = "consuming"
        report.append(
            {
                "name": name,
                "state": state,
                "assigned_partitions": None if assigned is None else int(assigned),
                "lag": None if assigned == 0 else now.total(_CONSUMER_LAG, consumer=name),
                "circuit_open": circuit_open,
                "delivered_per_minute": round(
                    growth.total(_CONSUMER_DELIVERED, consumer=name) * per_minute, 1
                ),
            }
        )
    return report


def _workers(workers: Sequence[tuple[int, str, WorkerPart | None]]) -> list[dict[str, Any]]:
    return [
        {
            "worker": index,
            "pid": int(pid) if pid else None,
            "up": part is not None,
            "accepted": None if part is None else part.now.total(_ACCEPTED),
        }
        for index, pid, part in workers
    ]


def status_report(
    workers: Sequence[tuple[int, str, WorkerPart | None]],
    destinations: Sequence[Destination],
    answered_by: int,
    supervisor: Sequence[WorkerPart] = (),
) -> dict[str, Any]:
    """The status JSON of the whole proxy from each worker's ``(index, pid, part)``
    (part None: the worker did not answer); ``answered_by``: the worker asked;
    ``supervisor``: the supervisor's share (its consumers' figures), if it answered."""
    parts = [part for _, _, part in workers if part is not None] + list(supervisor)
    now = merged_readings([p.now for p in parts])
    growth = merged_readings([p.growth for p in parts])
    seconds = max(p.seconds for p in parts)
    per_minute = 60.0 / seconds
    health = {
        d.name: merged_health([p.health[d.name] for p in parts if d.name in p.health])
        for d in destinations
    }
    destination_report = _destinations(destinations, health, now, growth, per_minute)
    state, problems = overall_status([health[d.name] for d in destinations if d.durable])
    return {
        "time": utc_timestamp(time.time()),
        "version": __version__,
        "answered_by": answered_by,
        "uptime_seconds": round(max(p.uptime_seconds for p in parts), 1),
        "window_seconds": round(seconds, 1),
        "ready": state != "not_ready",
        # As /readyz says it: ready, degraded (taking events, not as it should), not_ready.
        "status": state,
        "problems": problems,
        "events": _events(now, growth, per_minute),
        "rules": _rules(now, growth, per_minute),
        "destinations": destination_report,
        "spools": _spools(health),
        "consumers": _consumers(now, growth, per_minute),
        "workers": _workers(workers),
        "recent_rejections": [
            {**r.as_json(), "time": utc_timestamp(r.time)} for r in newest_rejections(parts)
        ],
    }
