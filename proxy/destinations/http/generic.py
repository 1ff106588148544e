"""Any HTTP endpoint that takes OpenLineage JSON: full URL, optional batch mode (arrays)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from proxy.destinations.http.target import HttpTarget

__all__ = ["GenericHttpTarget"]


class GenericHttpTarget(HttpTarget):
    """POST to ``url`` as it is; 2xx is success, 5xx/408/425/429 retriable, other 4xx not.

    With ``batch_events`` above 1 a POST carries a JSON array of up to that many events
    (like the proxy's own ``/api/v1/lineage/batch``); the whole array succeeds or fails.
    """

    # Any HTTP endpoint taking OpenLineage events.
    kind: Literal["http"]
    # Events per POST; above 1, a JSON array (all or nothing).
    batch_events: Annotated[int, Field(ge=1)] = 1

    @property
    def batch_max_events(self) -> int:
        return self.batch_events
