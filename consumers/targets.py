"""The consumer's target kinds: ``kind`` → how to build its destination (a plain dict).

HTTP kinds (http, marquez, egeria, datahub) come from :mod:`proxy.destinations.http`, the
same code the proxy routes with; ``archive`` is the proxy's archive writer; ``kafka``
republishes with the proxy's Kafka producer.
Every destination is wrapped in the shared retry policy, never giving up on a retriable
failure, and the daemon's circuit breaker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from consumers.config import ArchiveTarget, KafkaTarget
from proxy.destinations import Destination
from proxy.destinations.archive import archive_destination
from proxy.destinations.config import producer_settings
from proxy.destinations.http.destination import HttpDestination
from proxy.destinations.http.target import HttpTarget
from proxy.destinations.http.targets import TARGETS as HTTP_TARGETS
from proxy.destinations.kafka import KafkaDestination, KafkaProducer
from proxy.destinations.retry import CircuitBreaker, OnRetry, RetryingDestination

__all__ = ["DESTINATION_BUILDERS", "build_destination"]


class RepublishDestination:
    """``kafka`` target: produce each event to another topic/cluster, owning its producer."""

    durable = True

    def __init__(self, name: str, target: KafkaTarget, source_bootstrap: str) -> None:
        self.name = name
        self.target = target
        self._producer = KafkaProducer(
            producer_settings(target.bootstrap_servers or source_bootstrap, target.producer)
        )
        self._kafka = KafkaDestination(name, self._producer, target.topic)

    async def start(self) -> None:
        self._producer.start()

    async def deliver(self, event: dict[str, Any], payload: bytes) -> None:
        await self._kafka.deliver(event, payload)

    async def ready(self) -> bool:
        return await self._kafka.ready()

    async def close(self) -> None:
        await asyncio.to_thread(self._producer.flush, 10.0)
        self._producer.stop()


Builder = Callable[[str, Any, str], Destination]


def _http(name: str, target: HttpTarget, source_bootstrap: str) -> Destination:
    return HttpDestination(name, target)


def _archive(name: str, target: ArchiveTarget, source_bootstrap: str) -> Destination:
    # The directory is absolute by now (resolved against the config file's folder).
    return archive_destination(name, target, Path.cwd())


DESTINATION_BUILDERS: dict[str, Builder] = {
    **dict.fromkeys(HTTP_TARGETS, _http),
    "archive": _archive,
    "kafka": RepublishDestination,
}


def build_destination(
    name: str,
    target: Any,
    source_bootstrap: str,
    *,
    breaker: CircuitBreaker,
    on_retry: OnRetry,
) -> RetryingDestination:
    """``target``'s destination with its retry policy, which in a consumer's config never
    gives up (:class:`~consumers.config.ConsumerConfig`): a retriable failure never comes
    out of it, only a permanent one (the target refused the event)."""
    inner = DESTINATION_BUILDERS[target.kind](name, target, source_bootstrap)
    return RetryingDestination(inner, target.retry, breaker=breaker, on_retry=on_retry)
