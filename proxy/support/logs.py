"""Logging to stderr, as plain lines or one JSON object per line, with context fields.

A log line about a request, a consumer or a destination says which one: the request id,
the consumer's name and the destination are kept in context variables (set once per
request by the proxy, once per daemon by a consumer) and copied onto every record by a
filter on the handler. asyncio tasks inherit the context of the code that creates them,
so a line logged deep inside a delivery carries the fields without being passed them.
A call may also give them explicitly (``extra={"destination": name}``); that wins.
JSON lines carry each set field as a key; plain lines end with ``key=value`` pairs.
"""

from __future__ import annotations

import logging
import sys
import time
from contextvars import ContextVar

import orjson

__all__ = [
    "CONSUMER",
    "CONTEXT_FIELDS",
    "DESTINATION",
    "REQUEST_ID",
    "setup_logging",
]

REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)
CONSUMER: ContextVar[str | None] = ContextVar("consumer", default=None)
DESTINATION: ContextVar[str | None] = ContextVar("destination", default=None)

# Record attribute → where its value comes from when the call did not give it.
CONTEXT_FIELDS: dict[str, ContextVar[str | None]] = {
    "request_id": REQUEST_ID,
    "consumer": CONSUMER,
    "destination": DESTINATION,
}


class _ContextFilter(logging.Filter):
    """Copies the context fields onto each record (None when unset); never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, variable in CONTEXT_FIELDS.items():
            if getattr(record, name, None) is None:
                setattr(record, name, variable.get())
        return True


def _context(record: logging.LogRecord) -> dict[str, str]:
    return {
        name: value for name in CONTEXT_FIELDS if (value := getattr(record, name, None)) is not None
    }


class _JsonFormatter(logging.Formatter):
    def __init__(self, process: str) -> None:
        super().__init__()
        self._process = process

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_context(record),
        }
        if self._process:
            entry["process"] = self._process
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry).decode()


class _TextFormatter(logging.Formatter):
    def __init__(self, process: str = "") -> None:
        tag = f"[{process}] " if process else ""
        super().__init__(f"%(asctime)s %(levelname)s {tag}%(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        fields = _context(record)
        if not fields:
            return line
        return line + " [" + " ".join(f"{k}={v}" for k, v in fields.items()) + "]"


def setup_logging(level: str = "INFO", json_format: bool = False, process: str = "") -> None:
    """``process`` names the process in every line (``worker-1``) when several log at once."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter(process) if json_format else _TextFormatter(process))
    handler.addFilter(_ContextFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # librdkafka is chatty about reconnects; its warnings still come through.
    logging.getLogger("librdkafka").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
