"""Repairs are logged one line per kind a minute, with the count of those held back."""

from __future__ import annotations

import logging

from proxy.ingest.repair_log import RepairLog
from proxy.openlineage.repaired import Repair, RepairedEvent
from tests.support.sample_events import run_event


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _repaired(name: str) -> RepairedEvent:
    repair = Repair(name, "/eventTime", "2026-11-23T10:00:00", "2026-11-23T10:00:00Z")
    return RepairedEvent(run_event(namespace="team-a", name="etl"), (repair,))


def test_one_line_per_repair_kind_a_minute_then_one_with_the_count_held_back(caplog):
    caplog.set_level(logging.INFO, logger="proxy.ingest.repair_log")
    clock = Clock()
    log = RepairLog(clock=clock)
    for _ in range(50):
        log.repaired(_repaired("naive_time"))
        log.repaired(_repaired("bare_path"))
        clock.now += 0.5
    assert [r.getMessage().split(" at ")[0] for r in caplog.records] == [
        "repaired naive_time",
        "repaired bare_path",
    ]
    clock.now += 60
    log.repaired(_repaired("naive_time"))
    assert caplog.records[-1].getMessage().endswith("(49 more like it in the last 60 s)")
    assert "job team-a/etl" in caplog.records[-1].getMessage()
