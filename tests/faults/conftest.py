"""Fault tests: the tests that cause a failure for real (broker paused, killed or replaced,
disk full, target down, process killed, poison events) and report their figures
(figures.py), with the load tools they share (load.py). Tests that pause, kill or replace
the broker get one of their own (``dedicated_broker``)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

import pytest

from proxy.embedded_broker import EmbeddedBroker


@pytest.fixture
def dedicated_broker() -> Iterator[EmbeddedBroker]:
    """A Tansu broker for one test; resumed (if paused) and stopped at the end."""
    broker = EmbeddedBroker().start()
    try:
        yield broker
    finally:
        if broker.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(broker.pid, signal.SIGCONT)
        broker.stop()
