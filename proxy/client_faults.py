"""What misbehaving clients do, counted by kind and logged at a limited rate.

A client that leaves mid-body, sends a header byte every few seconds or speaks broken
HTTP is not a fault of the proxy: it must show as ``client_errors_total{kind}``, never
as a 500, and thousands of them must cost the log one line per kind every
``interval`` seconds, not a traceback each.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

from proxy.metrics import ProxyMetrics

__all__ = ["ClientFaults", "ServerLog"]

log = logging.getLogger(__name__)


class ClientFaults:
    """Count every client fault; log one line per kind per ``interval`` seconds."""

    def __init__(self, metrics: ProxyMetrics, interval: float = 10.0) -> None:
        self.interval = interval
        self._counter = functools.cache(metrics.client_errors.labels)
        # kind → (monotonic time of its last log line, faults since then not logged)
        self._last: dict[str, tuple[float, int]] = {}

    def record(self, kind: str, message: str, peer: object = None) -> None:
        self._counter(kind).inc()
        now = time.monotonic()
        last, unlogged = self._last.get(kind, (float("-inf"), 0))
        if now - last < self.interval:
            self._last[kind] = (last, unlogged + 1)
            return
        self._last[kind] = (now, 0)
        more = f" ({unlogged} more of this kind not logged)" if unlogged else ""
        log.warning("client fault %s from %s: %s%s", kind, peer or "?", message, more)


class ServerLog(logging.LoggerAdapter[logging.Logger]):
    """The logger aiohttp's connection handler writes to (``logger=`` of the runner).

    aiohttp logs a client's malformed HTTP (bad request line, conflicting lengths, bad
    chunking) as an ERROR with a traceback; here it becomes a counted, rate-limited
    client fault. Anything else aiohttp reports is ours and passes through whole.
    """

    def __init__(self, faults: ClientFaults) -> None:
        super().__init__(logging.getLogger("aiohttp.server"), {})
        self.faults = faults

    def exception(self, msg: object, *args: Any, exc_info: Any = True, **kwargs: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            first_line = (exc_info.message or type(exc_info).__name__).splitlines()[0]
            self.faults.record("bad_http", first_line, args[0] if args else None)
            return
        super().exception(msg, *args, exc_info=exc_info, **kwargs)
