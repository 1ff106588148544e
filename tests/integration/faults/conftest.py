"""Fault tests get a broker of their own: they pause, kill and replace it."""

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
