"""The tap across the workers of ``serve --workers N``: a subscriber on one worker sees
the events every worker accepts.

A worker with subscribers says so to its siblings over their private channel
(:class:`proxy.metrics.workers.Siblings`, ``POST /tap/listen``) when its first one
arrives, again every few seconds while it has any (a lease, so a sibling that restarted
learns it, and a listener that died is forgotten), and when its last one leaves. A
worker holding a lease from some sibling publishes as if it had a subscriber and puts
each event in that sibling's bounded outbox; one task per sibling sends the outbox in
batches (``POST /tap/events``), where the events are offered to the local subscribers
with their own filters and scopes. Publishing never waits: an event that does not fit
the outbox (1,000 events, and the bytes the queue budget ``server.max_queued_bytes``
has left: an outbox holds its events' JSON size until they are sent), or a batch the
sibling did not take, is dropped and counted in ``lineage_proxy_tap_dropped``. When no
worker has subscribers nothing is sent.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Iterable

from aiohttp import web

from proxy.metrics.workers import Siblings
from proxy.support.queued_bytes import Queue
from proxy.tap.hub import DEFAULT_QUEUE_SIZE, TapHub, TappedEvent
from proxy.validation.exact_json import dumps, loads

__all__ = ["TapRelay"]

# A listener says so this often; a sibling forgets one that did not for a lease.
_RENEW_SECONDS = 5.0
_LEASE_SECONDS = 15.0
_BATCH = 200


class TapRelay:
    """This worker's side of the tap between workers.

    Lifetime: constructed before ``siblings.start()`` (it adds its routes) →
    ``start()`` → ``await close()``.
    """

    def __init__(self, hub: TapHub, siblings: Siblings) -> None:
        self._hub = hub
        self._siblings = siblings
        # sibling index → when its lease ends (monotonic clock)
        self._leases: dict[int, float] = {}
        self._outboxes = {i: collections.deque[TappedEvent]() for i in siblings.others}
        self._wake = {i: asyncio.Event() for i in siblings.others}
        self._tasks: list[asyncio.Task[None]] = []
        siblings.add_route("POST", "/tap/listen", self._listen)
        siblings.add_route("POST", "/tap/events", self._events)
        hub.siblings = self

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._renew(), name="tap-leases")] + [
            asyncio.create_task(self._send(i), name=f"tap-to-worker-{i}")
            for i in self._siblings.others
        ]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def announce(self, listening: bool) -> None:
        body = dumps({"worker": self._siblings.slot.index, "listening": listening})
        await asyncio.gather(
            *(self._siblings.post(i, "/tap/listen", body) for i in self._siblings.others)
        )

    def forward(self, tapped: TappedEvent) -> None:
        for index in self._leases:
            outbox = self._outboxes[index]
            if len(outbox) >= DEFAULT_QUEUE_SIZE or not self._hub.budget.take(
                Queue.TAP_RELAY, tapped.size
            ):
                self._hub.dropped_total += 1
                continue
            outbox.append(tapped)
            self._wake[index].set()

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(_RENEW_SECONDS)
            if self._hub.subscribers:
                await self.announce(True)
            now = time.monotonic()
            for index, until in list(self._leases.items()):
                if until < now:
                    self._end_lease(index)

    async def _send(self, index: int) -> None:
        outbox, wake = self._outboxes[index], self._wake[index]
        while True:
            await wake.wait()
            wake.clear()
            while outbox:
                batch = [outbox.popleft() for _ in range(min(len(outbox), _BATCH))]
                body = dumps([tapped.as_json() for tapped in batch])
                sent = await self._siblings.post(index, "/tap/events", body)
                # Held until sent: the body is the batch written out.
                self._give_back(batch)
                if not sent:
                    # Gone or too slow: it announces again if it still listens.
                    self._hub.dropped_total += len(batch) + len(outbox)
                    self._end_lease(index)
                del batch, body  # not held while this task waits for more

    def _end_lease(self, index: int) -> None:
        """Stop forwarding to ``index``; what its outbox holds is for nobody now."""
        self._leases.pop(index, None)
        outbox = self._outboxes[index]
        self._give_back(outbox)
        outbox.clear()
        self._hub.set_forwarding(bool(self._leases))

    def _give_back(self, events: Iterable[TappedEvent]) -> None:
        self._hub.budget.give_back(Queue.TAP_RELAY, sum(tapped.size for tapped in events))

    async def _listen(self, request: web.Request) -> web.Response:
        said = loads(await request.read())
        index = said["worker"]
        if index in self._outboxes:
            if said["listening"]:
                self._leases[index] = time.monotonic() + _LEASE_SECONDS
                self._hub.set_forwarding(True)
            else:
                self._end_lease(index)
        return web.Response(status=204)

    async def _events(self, request: web.Request) -> web.Response:
        for item in loads(await request.read()):
            self._hub.offer(TappedEvent.from_json(item))
        return web.Response(status=204)
