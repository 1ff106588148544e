"""Logging to stderr, as plain lines or one JSON object per line."""

from __future__ import annotations

import logging
import sys
import time

import orjson

__all__ = ["setup_logging"]


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
        }
        if self._process:
            entry["process"] = self._process
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry).decode()


def setup_logging(level: str = "INFO", json_format: bool = False, process: str = "") -> None:
    """``process`` names the process in every line (``worker-1``) when several log at once."""
    handler = logging.StreamHandler(sys.stderr)
    if json_format:
        handler.setFormatter(_JsonFormatter(process))
    else:
        tag = f"[{process}] " if process else ""
        handler.setFormatter(
            logging.Formatter(f"%(asctime)s %(levelname)s {tag}%(name)s: %(message)s")
        )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # librdkafka is chatty about reconnects; its warnings still come through.
    logging.getLogger("librdkafka").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
