"""Send events to an OpenLineage HTTP endpoint from a bounded queue on a background thread.

The Spark job must never wait for lineage, so :meth:`EventSender.submit` only enqueues
(and drops with a warning and a count when the queue is full); a daemon thread POSTs.
HTTP follows the official openlineage-python client: ``POST {url}/{endpoint}`` (default
``api/v1/lineage``), JSON body, ``Authorization: Bearer <api key>`` when set, a ~5 s
timeout, retries with backoff on 500/502/503/504 and on connection errors, success is any
status below 400. :meth:`EventSender.close` drains within a bounded time so the last
COMPLETE is not lost when the driver exits.

The retry policy is the emitter's own (:class:`RetryPolicy`), not the proxy's: this
package ships to a Spark cluster alone, with the standard library and PySpark only, so it
imports nothing from the proxy — nor its dependencies (JSON is the standard library's;
a job sends a handful of events, not thousands a second).
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["DeliveryStats", "EventSender", "RetryPolicy"]

log = logging.getLogger(__name__)

# What the official client retries (urllib3 Retry status_forcelist); other refusals are final.
RETRY_STATUSES = frozenset({500, 502, 503, 504})
_STOP = object()


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently one event is tried: by default five retries after the
    first try, as the official client does, with exponential backoff and full jitter."""

    max_attempts: int = 6  # the first try included
    initial_backoff_seconds: float = 0.3
    max_backoff_seconds: float = 5.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.initial_backoff_seconds <= 0:
            raise ValueError("max_attempts must be >= 1 and initial_backoff_seconds > 0")

    def backoff_seconds(self, attempt: int, draw: Callable[[], float] = random.random) -> float:
        """Wait before retry number ``attempt`` (1-based): a uniform draw under the
        exponential cap, so many drivers retrying one endpoint do not retry in step."""
        cap = min(self.max_backoff_seconds, self.initial_backoff_seconds * 2.0 ** (attempt - 1))
        return draw() * cap


@dataclass
class DeliveryStats:
    """Counters a caller (or a test) can read: what happened to the submitted events."""

    sent: int = 0
    failed: int = 0
    dropped: int = 0


class EventSender:
    """A bounded queue drained by one daemon thread that POSTs each event."""

    def __init__(
        self,
        url: str,
        *,
        endpoint: str = "api/v1/lineage",
        api_key: str | None = None,
        timeout: float = 5.0,
        retry: RetryPolicy = RetryPolicy(),
        queue_size: int = 10_000,
    ) -> None:
        # Joined like the official client, so a URL with a path prefix keeps it.
        self.target = f"{url.rstrip('/')}/{endpoint.lstrip('/')}"
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = timeout
        self._retry = retry
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._closed = False
        self.stats = DeliveryStats()
        self._thread = threading.Thread(target=self._run, name="openlineage-sender", daemon=True)
        self._thread.start()

    def submit(self, event: dict[str, Any]) -> bool:
        """Queue ``event`` for sending; never blocks. False if it was dropped."""
        if self._closed:
            self.stats.dropped += 1
            return False
        try:
            self._queue.put_nowait(json.dumps(event, separators=(",", ":")).encode())
        except queue.Full:
            self.stats.dropped += 1
            log.warning(
                "openlineage: send queue full, event dropped (%d so far)", self.stats.dropped
            )
            return False
        return True

    def flush(self, timeout: float) -> bool:
        """Wait until every queued event has been sent (or given up); False on timeout."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def close(self, timeout: float) -> bool:
        """Send what is queued within ``timeout`` seconds, then stop; False if some was left."""
        if self._closed:
            return True
        drained = self.flush(timeout)
        self._closed = True
        # A full queue means the thread is busy until the process ends: a daemon, it dies then.
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(_STOP)
        if not drained:
            log.warning(
                "openlineage: %d event(s) not sent within %.1fs at exit",
                self._queue.qsize(),
                timeout,
            )
        return drained

    def _run(self) -> None:
        while True:
            body = self._queue.get()
            try:
                if body is _STOP:
                    return
                self._post(body)
            except Exception:  # the sender thread must survive anything
                log.exception("openlineage: unexpected error while sending")
            finally:
                self._queue.task_done()

    def _post(self, body: bytes) -> None:
        for attempt in range(1, self._retry.max_attempts + 1):
            status, reason = self._attempt(body)
            if status is not None and status < 400:
                self.stats.sent += 1
                return
            retriable = status is None or status in RETRY_STATUSES
            # Once close() has given up waiting, nobody is left to wait for retries.
            if not retriable or attempt == self._retry.max_attempts or self._closed:
                break
            time.sleep(self._retry.backoff_seconds(attempt))
        self.stats.failed += 1
        log.warning("openlineage: event not delivered to %s: %s", self.target, reason)

    def _attempt(self, body: bytes) -> tuple[int | None, str]:
        request = urllib.request.Request(self.target, body, self._headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                return response.status, f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            return exc.code, f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            return None, str(getattr(exc, "reason", exc))
