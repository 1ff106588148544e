"""Merging the workers' shares of the status page, and a hub forwarding to its siblings'
taps: pure, no server."""

from __future__ import annotations

from dataclasses import replace

import pytest

from proxy.tap.hub import TapHub, TappedEvent
from proxy.validation.exact_json import dumps, loads
from proxy.web.readiness import Health
from proxy.web.rejections import Rejected
from proxy.web.status.parts import (
    MAX_REJECTIONS,
    WorkerPart,
    merged_health,
    merged_readings,
    newest_rejections,
)
from proxy.web.status.rates import Reading
from proxy.web.status.report import _quantile
from routing_rules.ruleset import Route, Trace
from tests.support.sample_events import run_event
from tests.unit.test_status_figures import latency_reading


def part(worker: int, reading: Reading, rejections: list[Rejected]) -> WorkerPart:
    return WorkerPart(
        worker=worker,
        pid=100 + worker,
        uptime_seconds=3.0,
        now=reading,
        growth=reading,
        seconds=60.0,
        health={"kafka": Health(True, None, {"spooling": False, "events": 0})},
        rejections=rejections,
    )


def test_p99_across_workers_comes_from_their_summed_buckets():
    fast_worker = latency_reading(*[0.005] * 90)
    slow_worker = latency_reading(*[0.05] * 10)
    merged = merged_readings([fast_worker, slow_worker])
    # As if one process had seen all 100: rank 99 is the 9th of 10 in (0.01, 0.1].
    assert _quantile(merged, "kafka", 0.99) == pytest.approx(0.091, abs=1e-9)
    assert merged.total("lineage_proxy_delivery_seconds_count") == 100
    # Neither worker alone says so.
    assert (_quantile(fast_worker, "kafka", 0.99) or 1.0) < 0.01


def test_a_workers_share_survives_the_channel_unchanged():
    rejected = Rejected(1.5, 400, "invalid", "bad", ("/run/runId",), "req-1")
    share = part(1, latency_reading(0.02, 0.3), [rejected])
    received = WorkerPart.from_json(loads(dumps(share.as_json())))
    assert (received.now.at, received.now.values) == (share.now.at, share.now.values)
    assert received.growth.values == share.growth.values
    assert replace(received, now=share.now, growth=share.growth) == share


def test_destination_health_is_the_worst_any_worker_sees_with_spools_summed():
    states = [
        Health(True, "closed", {"spooling": False, "events": 0, "oldest_age_seconds": 0.0}),
        Health(False, "open", {"spooling": True, "events": 7, "oldest_age_seconds": 4.5}),
        Health(True, "half-open", {"spooling": True, "events": 3, "oldest_age_seconds": 9.0}),
    ]
    assert merged_health(states) == Health(
        False, "open", {"spooling": True, "events": 10, "oldest_age_seconds": 9.0}
    )
    assert merged_health([Health(True, None, None)]) == Health(True, None, None)


def test_refusals_of_all_workers_are_merged_newest_first_and_bounded():
    def refusals(times: range) -> list[Rejected]:
        return [Rejected(float(t), 400, "invalid", f"at {t}", (), None) for t in times]

    shares = [
        part(0, Reading(0, {}), refusals(range(0, 80, 2))),
        part(1, Reading(0, {}), refusals(range(1, 80, 2))),
    ]
    merged = newest_rejections(shares)
    assert [r.time for r in merged] == [float(t) for t in range(79, 79 - MAX_REJECTIONS, -1)]


class Siblings:
    def __init__(self) -> None:
        self.forwarded: list[TappedEvent] = []

    def forward(self, tapped: TappedEvent) -> None:
        self.forwarded.append(tapped)

    async def announce(self, listening: bool) -> None:
        pass


def test_a_hub_publishes_and_forwards_only_while_a_sibling_listens():
    hub, siblings = TapHub(), Siblings()
    hub.siblings = siblings
    assert not hub.listening
    hub.set_forwarding(True)
    assert hub.listening
    event = run_event()
    hub.publish(event, Route(event, ()), Trace(matched=["r1"]))
    (tapped,) = siblings.forwarded
    assert TappedEvent.from_json(loads(dumps(tapped.as_json()))) == tapped
    hub.set_forwarding(False)
    assert not hub.listening
