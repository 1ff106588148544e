"""Tap readers that misbehave on purpose, on a raw socket (aiohttp's client reads too
eagerly to stall)."""

from __future__ import annotations

import socket

__all__ = ["stalled_reader"]


def stalled_reader(port: int) -> socket.socket:
    """A tap reader with a 4 KB receive window that reads the answer's first bytes only."""
    reader = socket.socket()
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    reader.settimeout(30)
    reader.connect(("127.0.0.1", port))
    reader.sendall(b"GET /api/v1/tap HTTP/1.1\r\nHost: proxy\r\n\r\n")
    assert b" 200 " in reader.recv(64)
    return reader
