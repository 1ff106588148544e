"""Fault tests: the tests that cause a failure for real (broker paused, killed or replaced,
disk full, target down, process killed, poison events) and report their figures
(figures.py). Tests that pause, kill or replace the broker get one of their own
(``dedicated_broker``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from proxy.server.embedded_broker import EmbeddedBroker
from tests.support.brokers import running_broker


@pytest.fixture
def dedicated_broker() -> Iterator[EmbeddedBroker]:
    """A Tansu broker for one test, killed at the end (even if a test paused it)."""
    with running_broker() as broker:
        yield broker
