"""Deliver OpenLineage events over HTTP to one target, through one aiohttp session.

Used by the consumer daemons and by the proxy's routing ``http`` destination. The target
(:mod:`proxy.destinations.http.target` and its kinds) knows the URL, auth and how to judge
an answer; this module knows HTTP: sending, timeouts, connection errors and
``Retry-After``. It does not retry: wrap it in
:class:`proxy.destinations.retry.RetryingDestination` (see :func:`http_destination`).
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any

import aiohttp

from proxy.destinations.base import DeliveryError, Destination, Unfit
from proxy.destinations.hops import outgoing_headers
from proxy.destinations.http.config import HttpDestinationConfig
from proxy.destinations.http.target import CannotTake, HttpTarget, Verdict
from proxy.destinations.retry import CircuitBreaker, OnRetry, RetryingDestination

if TYPE_CHECKING:
    from proxy.destinations.registry import DestinationResources

__all__ = ["EXCERPT_BYTES", "HttpDeliveryError", "HttpDestination", "parse_retry_after"]

# How much of a refusing answer is kept for logs and dead-letter headers.
EXCERPT_BYTES = 512


class HttpDeliveryError(DeliveryError):
    """A target refused or did not answer; carries the HTTP status and a body excerpt."""

    def __init__(
        self,
        destination: str,
        reason: str,
        *,
        retriable: bool,
        status: int | None = None,
        excerpt: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(destination, reason, retriable=retriable, retry_after=retry_after)
        self.status = status
        self.excerpt = excerpt


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class HttpDestination(Destination):
    """POST events to ``target.endpoint()``; one at a time, or as a JSON array."""

    durable = False

    def __init__(self, name: str, target: HttpTarget) -> None:
        self.name = name
        self.target = target
        # The payload is sent as the target fits it; most never look at the event dict.
        self.reads_event = target.reads_event
        self._url: str = target.endpoint()
        self._headers: dict[str, str] = target.request_headers()
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.target.timeout_seconds),
            connector=aiohttp.TCPConnector(limit=self.target.max_connections),
        )

    def deliver(self, event: dict[str, Any], payload: bytes) -> Coroutine[Any, Any, None]:
        # The POST's own coroutine, not one around it: one frame fewer per event.
        return self._post(self._fitted(event, payload), self.target.fails_for_good(event))

    async def deliver_batch(
        self, events: Sequence[dict[str, Any]], payloads: Sequence[bytes]
    ) -> None:
        """POST ``payloads`` as one JSON array; all of them succeed or fail together."""
        fitted = [self._fitted(e, p) for e, p in zip(events, payloads, strict=True)]
        await self._post(b"[" + b",".join(fitted) + b"]")

    def _fitted(self, event: dict[str, Any], payload: bytes) -> bytes:
        """The payload as the target takes it; :class:`Unfit` when it cannot."""
        try:
            return self.target.fitted(event, payload)
        except CannotTake as exc:
            raise Unfit(self.name, exc.reason) from None

    async def _post(self, body: bytes, final: str | None = None) -> None:
        """POST ``body``; a refusal raises :class:`HttpDeliveryError`, never retriable when
        ``final`` says why (see :meth:`HttpTarget.fails_for_good`)."""
        if self._session is None:
            raise RuntimeError(f"{self.name}: destination not started")
        try:
            # Says how many proxies the event passed: a target that is a proxy refuses a
            # loop (proxy.destinations.hops).
            headers = {**self._headers, **outgoing_headers()}
            async with self._session.post(self._url, data=body, headers=headers) as resp:
                answer = await resp.read()
                status = resp.status
                retry_after = parse_retry_after(resp.headers.get("Retry-After"))
        except TimeoutError as exc:
            raise HttpDeliveryError(
                self.name, f"no answer within {self.target.timeout_seconds}s", retriable=True
            ) from exc
        except aiohttp.ClientError as exc:
            raise HttpDeliveryError(self.name, f"connection failed: {exc}", retriable=True) from exc
        verdict = self.target.judge(status, answer)
        if not verdict.accepted:
            if final is not None:
                verdict = Verdict(False, False, f"{final}: {verdict.reason}")
            raise HttpDeliveryError(
                self.name,
                verdict.reason,
                retriable=verdict.retriable,
                status=status,
                excerpt=answer[:EXCERPT_BYTES].decode("utf-8", "replace"),
                retry_after=retry_after if verdict.retriable else None,
            )

    async def healthy(self) -> bool | None:
        """The target's health check (GET, 2xx: up), or None when it has none."""
        url = self.target.health_check()
        if url is None or self._session is None:
            return None
        try:
            async with self._session.get(url, headers=self._headers) as resp:
                await resp.read()
                return 200 <= resp.status < 300
        except (TimeoutError, aiohttp.ClientError):
            return False

    async def ready(self) -> bool:
        return self._session is not None and not self._session.closed

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            # Let the connector's transports finish closing (aiohttp's advice).
            await asyncio.sleep(0)
            self._session = None


async def build(
    name: str, config: HttpDestinationConfig, resources: DestinationResources
) -> HttpDestination:
    """An (unstarted) HTTP destination for a route or a consumer (it needs none of
    ``resources``)."""
    destination = HttpDestination(name, config.target)
    # Durability is the route's promise, not the adapter's: a required target makes the
    # client's answer wait for it like Kafka and the archive.
    destination.durable = config.required
    return destination


def http_destination(
    name: str,
    target: HttpTarget,
    *,
    breaker: CircuitBreaker | None = None,
    on_retry: OnRetry | None = None,
) -> RetryingDestination:
    """An HTTP destination for ``target`` that retries per ``target.retry``."""
    return RetryingDestination(
        HttpDestination(name, target), target.retry, breaker=breaker, on_retry=on_retry
    )
