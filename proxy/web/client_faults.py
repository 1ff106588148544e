"""What misbehaving clients do, counted by kind and logged at a limited rate.

A client that leaves mid-body, sends a header byte every few seconds or speaks broken
HTTP is not a fault of the proxy: it must show as ``client_errors_total{kind}``, never
as a 500, and thousands of them must cost the log one line per kind every
``interval`` seconds, not a traceback each. Requests the proxy refuses (400, 401, 403,
413 ...) are logged the same way, per reason, so an operator can see who is refused and
why — the request id, the client, the producer and job, the pointer and the reason,
never the payload or the token.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from proxy.metrics.process import ProxyMetrics
from proxy.openlineage.sender import Sender
from proxy.support.logs import REQUEST_ID
from proxy.support.throttled_log import ThrottledLog
from proxy.web.rejections import RecentRejections
from proxy.web.request_ids import HEADER as REQUEST_ID_HEADER
from proxy.web.request_ids import sane_request_id

__all__ = ["ClientFaults", "ServerLog"]

log = logging.getLogger(__name__)

# Detail messages kept per refusal, and their length: enough to say what is wrong.
_MESSAGES = 5
_MESSAGE_CHARS = 200


class ClientFaults:
    """Count every client fault; log one line per kind (and per refusal reason) per
    ``interval`` seconds, with the number of lines held back since the last one."""

    def __init__(self, metrics: ProxyMetrics, interval: float = 10.0) -> None:
        self._counter = functools.cache(metrics.client_errors.labels)
        # The last refusals without their payloads, for the status page.
        self.recent = RecentRejections()
        self._log = ThrottledLog(log, interval)

    @property
    def interval(self) -> float:
        """Seconds between two log lines of one kind."""
        return self._log.interval

    @interval.setter
    def interval(self, seconds: float) -> None:
        self._log.interval = seconds

    def record(self, kind: str, message: str, peer: object = None) -> None:
        self._counter(kind).inc()
        self._warn(f"fault:{kind}", "client fault %s from %s: %s", kind, peer or "?", message)

    def refused(
        self,
        request: web.Request,
        status: int,
        reason: str,
        error: str,
        details: Sequence[Mapping[str, str]] = (),
        event: Any = None,
    ) -> None:
        """Log a refused request (or event of a batch) and keep it for the status page:
        status, reason, our one-line error, each detail's pointer and message (ours,
        which name what is wrong, never a value), the client's address and — when the
        body was read — who sent the event: its producer and job (or dataset). Never the
        payload or the token."""
        # The request's id while it is handled; outside, the client's header if it is sane
        # (it goes into the log line and the status page as it is).
        request_id = REQUEST_ID.get() or sane_request_id(request.headers.get(REQUEST_ID_HEADER))
        pointers = [d["pointer"] for d in details if "pointer" in d]
        messages = [
            f"{d.get('pointer') or '(body)'}: {d['message']}"[:_MESSAGE_CHARS]
            for d in details[:_MESSAGES]
            if "message" in d
        ]
        sender = Sender.of(event)
        client = request.remote or "?"
        self.recent.add(
            status,
            reason,
            error,
            pointers,
            request_id,
            client=client,
            producer=sender.producer,
            job=sender.job,
            messages=messages,
        )
        where = f" at {pointers[0]}" if pointers else ""
        if len(pointers) > 1:
            where += f" (+{len(pointers) - 1})"
        self._warn(
            f"refused:{reason}",
            "refused %d %s from %s%s%s: %s%s",
            status,
            reason,
            client,
            f" request id {request_id!r}" if request_id else "",
            sender.described(),
            error,
            where,
        )

    def _warn(self, key: str, message: str, *args: object) -> None:
        self._log.warning(key, message, *args)


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
