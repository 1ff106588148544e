"""The envelope an invalid event is kept in: the event as sent, why it was refused, when.

The pipeline wraps refused events in it for the ``rejected`` route (by default topic
``openlineage.events.rejected`` and ``rejected/`` in the archive); ``lineage-proxy
replay`` unwraps it to send the event again once the cause is fixed. Its ``eventTime``
is the time of refusal, so the archive files it by that day, like any event.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

__all__ = ["rejected_envelope", "rejected_event"]


def rejected_envelope(event: Any, rejection: dict[str, Any]) -> dict[str, Any]:
    """``{"eventTime": now, "rejection": rejection, "event": event}``."""
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {"eventTime": now, "rejection": rejection, "event": event}


def rejected_event(document: dict[str, Any]) -> Any | None:
    """The refused event inside ``document`` if it is an envelope, else None."""
    if "rejection" in document and "event" in document and "run" not in document:
        return document["event"]
    return None
