"""An event the proxy repaired before forwarding it, and what each repair changed.

Validation (:mod:`proxy.validation.repairs`) makes these; the Kafka destination reads
them for the ``ol_repairs`` header and the HTTP endpoints for the 2xx body. The marker
travels with the event itself (a ``dict`` subclass, serialized like any dict), so no
stage in between needs to pass it along by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["Repair", "RepairedEvent"]


@dataclass(frozen=True, slots=True)
class Repair:
    """One value the proxy changed: which repair, where (JSON pointer), from what, to what."""

    name: str
    pointer: str
    before: str
    after: str

    def as_json(self, pointer_prefix: str = "") -> dict[str, str]:
        return {
            "repair": self.name,
            "pointer": pointer_prefix + self.pointer,
            "from": self.before,
            "to": self.after,
        }


class RepairedEvent(dict[str, Any]):
    """The repaired event (the dict is what is forwarded) with the repairs made to it."""

    __slots__ = ("repairs",)

    def __init__(self, event: dict[str, Any], repairs: tuple[Repair, ...]) -> None:
        super().__init__(event)
        self.repairs = repairs

    def header_value(self) -> bytes:
        """The ``ol_repairs`` Kafka header: a JSON array of what was changed."""
        return orjson.dumps([repair.as_json() for repair in self.repairs])
