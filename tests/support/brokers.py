"""Test brokers: Tansu on a port of this worker, ended with SIGKILL.

Tansu takes about 5 s to stop cleanly while any client is still connected; a test broker
keeps nothing worth a clean stop (memory only), and no test here is about its shutdown,
so it is killed. Tests that pause, kill or replace a broker get their own
(``dedicated_broker`` in tests/faults/conftest.py); the session's is shared by a worker's
tests (``broker`` in tests/conftest.py)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

from proxy.server.embedded_broker import EmbeddedBroker
from tests.support.ports import free_port

__all__ = ["kill", "running_broker"]


def kill(broker: EmbeddedBroker) -> None:
    """End ``broker`` at once (resumed first if a test paused it, which a kill ignores
    anyway); a no-op when it is not running."""
    if broker.pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(broker.pid, signal.SIGKILL)
    broker.stop()  # reaps the killed process


@contextlib.contextmanager
def running_broker(port: int | None = None) -> Iterator[EmbeddedBroker]:
    """A Tansu broker on ``port`` or a port of this worker's block, killed at the end."""
    broker = EmbeddedBroker(port=port or free_port()).start()
    try:
        yield broker
    finally:
        kill(broker)
