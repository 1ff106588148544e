"""Many deliveries of one request at once, each failing alone.

Apart from :mod:`.base` because it needs asyncio, and the pure config modules import
:mod:`.base` (through the package) without loading any I/O machinery."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from proxy.destinations.base import DeliveryError

__all__ = ["deliver_each"]

T = TypeVar("T")


async def deliver_each(
    deliver: Callable[..., Awaitable[T]], calls: Sequence[tuple[Any, ...]]
) -> list[T | DeliveryError]:
    """``deliver(*args)`` for every ``args`` of ``calls`` at once (started in order, so
    per-key order holds where ``deliver`` queues synchronously); per call its result or
    its :class:`DeliveryError`. Any other exception is a bug and propagates."""
    if len(calls) == 1:
        try:
            return [await deliver(*calls[0])]
        except DeliveryError as exc:
            return [exc]
    results = await asyncio.gather(*(deliver(*args) for args in calls), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, DeliveryError):
            raise result
    return results  # type: ignore[return-value]  # only T and DeliveryError are left
