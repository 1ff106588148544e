"""The last refused requests, for the status page: where and why, never what.

Fed from :meth:`proxy.web.client_faults.ClientFaults.refused`, the one place a 4xx answer
(invalid event, missing token, forbidden namespace, too large) is logged. A bounded
ring: a flood of refusals costs a fixed amount of memory. It keeps the status, the
reason, our one-line error, the JSON pointers with our messages (the validator's words
name what is wrong, never a value), the request id, the client's address and who sent
the event (producer, job or dataset namespace/name) — never the payload or the token.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["RecentRejections", "Rejected"]


@dataclass(frozen=True, slots=True)
class Rejected:
    time: float  # wall clock, seconds since the epoch
    status: int
    reason: str
    error: str
    pointers: tuple[str, ...]
    request_id: str | None
    client: str | None = None
    producer: str | None = None
    job: str | None = None
    # "pointer: message" of the details, ours (they name what is wrong, not a value).
    messages: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "pointers": list(self.pointers), "messages": list(self.messages)}


class RecentRejections:
    def __init__(self, size: int = 50) -> None:
        self._ring: collections.deque[Rejected] = collections.deque(maxlen=size)

    def add(
        self,
        status: int,
        reason: str,
        error: str,
        pointers: Sequence[str],
        request_id: str | None = None,
        *,
        client: str | None = None,
        producer: str | None = None,
        job: str | None = None,
        messages: Sequence[str] = (),
    ) -> None:
        self._ring.append(
            Rejected(
                time.time(),
                status,
                reason,
                error,
                tuple(pointers),
                request_id,
                client,
                producer,
                job,
                tuple(messages),
            )
        )

    def newest_first(self) -> list[Rejected]:
        return list(reversed(self._ring))
