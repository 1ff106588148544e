"""Loopback ports for what tests start (brokers, proxies, doubles), taken from a block
of this worker's own below the kernel's ephemeral range (32768+).

Two workers asking the kernel for "any free port" can be handed the same one between a
check and a bind, and a port a client connection uses (ephemeral) can be handed to a
server. Each worker picks from its own block, so workers never race each other; the bind
check covers anything else on the machine."""

from __future__ import annotations

import itertools
import os
import random
import socket

from tests.support.workers import worker_index

__all__ = ["free_port"]

_FIRST = 20000
_BLOCK = 1500
# Start at a random spot of the block: suites run at once in other checkouts on the same
# machine then rarely walk the same ports in step.
_next = itertools.count(random.Random(os.getpid()).randrange(_BLOCK))


def free_port() -> int:
    """A loopback port of this worker's block that nothing listens on right now."""
    start = _FIRST + worker_index() * _BLOCK
    for _ in range(_BLOCK):
        port = start + next(_next) % _BLOCK
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise OSError(f"no free port in {start}..{start + _BLOCK - 1}")
