"""RFC 3339 UTC timestamps (``2026-11-26T14:02:11Z``), the form of OpenLineage's
``eventTime``; also how the proxy states times to operators (status, readiness, CLI)."""

from __future__ import annotations

import datetime

__all__ = ["utc_timestamp"]


def utc_timestamp(wall: float) -> str:
    """Unix time ``wall`` as ``YYYY-MM-DDTHH:MM:SSZ``."""
    when = datetime.datetime.fromtimestamp(wall, datetime.UTC)
    return when.isoformat(timespec="seconds").replace("+00:00", "Z")
