"""Subscribers to the live stream of accepted events, and what each one may see.

The pipeline calls :meth:`TapHub.publish` after every durable destination confirmed an
event, but only while :attr:`TapHub.listening` — with nobody listening a tap costs one
attribute read per event. Publishing never waits: each subscriber has a bounded queue,
and an event that does not fit is dropped for that subscriber and counted (the stream
says so), so a slow reader can never slow ingest. The events are serialized by the
reader's own task, not here.

A queue is bounded twice: in events (``queue_size``) and in bytes, every queued event
taking its JSON size from the process's :class:`~proxy.support.queued_bytes.QueueBudget`
(``server.max_queued_bytes``) until its reader wrote it. A reader that stopped reading
would otherwise keep its share of the budget for as long as its connection stays open:
once the budget refused some queue an event, a reader that has read nothing for
``STALLED_SECONDS`` while holding queued events is cut off — its queue emptied and its
bytes given back at once, its connection closed.

A subscriber sees an event only if its principal may post for the event's namespace
(the same scope as ingest, :meth:`~proxy.auth.principal.Principal.may_post_for`) and its filter
admits it. Namespace, job name and event type are the event as the client posted it;
the event shown is the one the destinations got (after the rules' transforms).

With ``serve --workers N`` a subscriber connects to one worker but sees every worker's
events: its hub tells the others (:class:`TapSiblings`, :mod:`proxy.tap.relay`), and
while some sibling listens a hub is :attr:`~TapHub.listening` too and forwards what it
publishes. With nobody listening anywhere there is no traffic between workers at all.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from fnmatch import fnmatchcase
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from proxy.auth.principal import Principal
from proxy.openlineage import EventKind, event_kind, subject_name
from proxy.support.queued_bytes import Queue, QueueBudget
from proxy.support.throttled_log import ThrottledLog
from proxy.validation.exact_json import dumps
from routing_rules.ruleset import Route, Trace
from routing_rules.stats import DEFAULT_RULE

__all__ = ["Subscription", "TapFilter", "TapHub", "TapSiblings", "TappedEvent"]

log = logging.getLogger(__name__)

# Events a subscriber may fall behind by before the next ones are dropped for it.
DEFAULT_QUEUE_SIZE = 1000
# A reader that read nothing for this long while holding queued events is stalled; it
# is cut off when the queue budget is short (a reader that reads at all never is).
STALLED_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class TappedEvent:
    """One accepted event and what the proxy did with it."""

    time: float  # wall clock, when every durable destination had it
    event: dict[str, Any]  # as delivered (after transforms)
    rules: tuple[str, ...]  # rules that matched, DEFAULT_RULE when the default route decided
    destinations: tuple[str, ...]
    dropped_by: str | None  # a rule that sent it nowhere on purpose
    namespace: str  # job (or dataset, for DatasetEvents) namespace as posted; "" if none
    name: str
    event_type: str | None
    dataset_event: bool
    size: int = 0  # bytes of the event's JSON: what it takes from the queue budget

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TappedEvent:
        return cls(
            **{**data, "rules": tuple(data["rules"]), "destinations": tuple(data["destinations"])}
        )


@dataclass(frozen=True, slots=True)
class TapFilter:
    """What a subscriber asked for; None admits everything. Globs for namespace and job."""

    rule: str | None = None
    namespace: str | None = None
    event_type: str | None = None
    job: str | None = None

    def admits(self, tapped: TappedEvent) -> bool:
        return (
            (self.rule is None or self.rule in tapped.rules)
            and (self.namespace is None or fnmatchcase(tapped.namespace, self.namespace))
            and (
                self.event_type is None
                or (tapped.event_type or "").upper() == self.event_type.upper()
            )
            and (self.job is None or fnmatchcase(tapped.name, self.job))
        )


class Subscription:
    """One listener: a bounded queue, the bytes it holds, and the count of events it missed.

    Its reader takes events with :meth:`next`; an event's bytes are held from
    :meth:`offer` until the reader asks for the next one (it has written this one by
    then), so a reader blocked mid-write still holds what it is writing.
    """

    def __init__(
        self, tap_filter: TapFilter, principal: Principal, size: int, budget: QueueBudget
    ) -> None:
        self.filter = tap_filter
        self.principal = principal
        self.queue: asyncio.Queue[TappedEvent | None] = asyncio.Queue(size)
        self.dropped = 0
        self.cut_off = False
        # Ends the reader's connection at once (set by the endpoint): a reader blocked
        # writing to a peer that reads nothing would never see the end-of-stream marker.
        self.abort: Callable[[], None] | None = None
        self._budget = budget
        self._queued_bytes = 0
        self._writing_bytes = 0
        self._last_read = time.monotonic()

    @property
    def held(self) -> int:
        """Bytes of the budget this subscriber holds: queued, and being written."""
        return self._queued_bytes + self._writing_bytes

    def offer(self, tapped: TappedEvent) -> bool:
        """Queue ``tapped`` if this subscriber may and wants to see it; False if dropped."""
        if (
            self.cut_off
            or not self.principal.may_post_for(tapped.namespace, dataset_event=tapped.dataset_event)
            or not self.filter.admits(tapped)
        ):
            return True
        if self.queue.full() or not self._budget.take(Queue.TAP, tapped.size):
            self.dropped += 1
            return False
        self._queued_bytes += tapped.size
        self.queue.put_nowait(tapped)
        return True

    async def next(self) -> TappedEvent | None:
        """The next event to write (the previous one is written: its bytes go back);
        None at the end of the stream."""
        self._give_back_written()
        tapped = await self.queue.get()
        self._last_read = time.monotonic()
        if tapped is not None:
            self._queued_bytes -= tapped.size
            self._writing_bytes = tapped.size
        return tapped

    def stalled(self, now: float) -> bool:
        """Holding events and read none for ``STALLED_SECONDS``."""
        return not self.cut_off and self.held > 0 and now - self._last_read >= STALLED_SECONDS

    def cut(self) -> int:
        """Drop every queued event, give their bytes back, end the stream and the
        connection; returns the bytes given back."""
        self.cut_off = True
        freed = self.release()
        self.queue.put_nowait(None)
        if self.abort is not None:
            self.abort()
        return freed

    def release(self) -> int:
        """Empty the queue (its events are freed now, not when the reader's task ends)
        and give back every byte held; returns how many."""
        while not self.queue.empty():
            if self.queue.get_nowait() is not None:
                self.dropped += 1
        freed = self.held
        if freed:
            self._budget.give_back(Queue.TAP, freed)
        self._queued_bytes = self._writing_bytes = 0
        return freed

    def close(self) -> None:
        """Wake the reader with the end-of-stream marker (making room for it if full)."""
        if self.queue.full():
            tapped = self.queue.get_nowait()
            if tapped is not None:
                self._queued_bytes -= tapped.size
                self._budget.give_back(Queue.TAP, tapped.size)
            self.dropped += 1
        self.queue.put_nowait(None)

    def _give_back_written(self) -> None:
        if self._writing_bytes:
            self._budget.give_back(Queue.TAP, self._writing_bytes)
            self._writing_bytes = 0


class TapSiblings(Protocol):
    """The other workers' taps, as a hub sees them."""

    def forward(self, tapped: TappedEvent) -> None:
        """Send ``tapped`` to the siblings that listen; never blocks."""

    def announce(self, listening: bool) -> Coroutine[Any, Any, None]:
        """Tell every sibling whether this worker has subscribers now."""


class TapHub(Collector):
    """The subscribers of one proxy process; also a Prometheus collector of its figures."""

    def __init__(
        self, queue_size: int = DEFAULT_QUEUE_SIZE, budget: QueueBudget | None = None
    ) -> None:
        self.queue_size = queue_size
        self.budget = budget if budget is not None else QueueBudget()
        self._subscriptions: list[Subscription] = []
        # Read on the hot path: a plain attribute, kept equal to
        # bool(_subscriptions) or forwarding.
        self.listening = False
        # Some sibling has subscribers: publish, and forward what is published.
        self.forwarding = False
        self.siblings: TapSiblings | None = None
        self._announcing: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.dropped_total = 0
        self.cut_off_total = 0
        self._refusals_seen = 0
        self.closed = False
        self._cut_off_log = ThrottledLog(log)

    @property
    def subscribers(self) -> int:
        return len(self._subscriptions)

    def set_forwarding(self, forwarding: bool) -> None:
        self.forwarding = forwarding
        self.listening = bool(self._subscriptions) or forwarding

    @contextmanager
    def subscribe(self, tap_filter: TapFilter, principal: Principal) -> Iterator[Subscription]:
        subscription = Subscription(tap_filter, principal, self.queue_size, self.budget)
        if self.closed:
            subscription.close()
        self._subscriptions.append(subscription)
        self.listening = True
        if self.siblings is not None and len(self._subscriptions) == 1:
            self._announcing = self._background(self.siblings.announce(True))
        try:
            yield subscription
        finally:
            self._subscriptions.remove(subscription)
            subscription.release()
            self.listening = bool(self._subscriptions) or self.forwarding
            if self.siblings is not None and not self._subscriptions:
                self._background(self.siblings.announce(False))

    async def joined(self) -> None:
        """Once the siblings know this worker listens (their events come from then on)."""
        if self._announcing is not None:
            await asyncio.shield(self._announcing)

    def _background(self, announcing: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(announcing, name="tap-announce")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def publish(
        self, posted: dict[str, Any], route: Route[Any], trace: Trace, size: int | None = None
    ) -> None:
        """Offer an accepted event to every subscriber; never blocks. ``size``: bytes of
        ``route.event`` as JSON, when the caller has it written already."""
        subject = subject_name(posted)
        event_type = posted.get("eventType")
        rules = tuple(trace.matched) + ((DEFAULT_RULE,) if trace.defaulted else ())
        tapped = TappedEvent(
            time=time.time(),
            event=route.event,
            rules=rules,
            destinations=tuple(d.name for d in route.destinations),
            dropped_by=route.dropped_by,
            namespace=subject[0] if subject else "",
            name=subject[1] if subject else "",
            event_type=event_type if isinstance(event_type, str) else None,
            dataset_event=event_kind(posted) is EventKind.DATASET,
            size=size if size is not None else len(dumps(route.event)),
        )
        self.offer(tapped)
        if self.forwarding and self.siblings is not None:
            self.siblings.forward(tapped)

    def offer(self, tapped: TappedEvent) -> None:
        """Offer an event (published here or by a sibling) to this process's subscribers."""
        for subscription in self._subscriptions:
            if not subscription.offer(tapped):
                self.dropped_total += 1
        if self.budget.refusals != self._refusals_seen:
            self._refusals_seen = self.budget.refusals
            self._cut_off_stalled()

    def _cut_off_stalled(self) -> None:
        """The budget refused some queue an event: free what readers that stopped
        reading hold."""
        now = time.monotonic()
        for subscription in self._subscriptions:
            if subscription.stalled(now):
                freed = subscription.cut()
                self.cut_off_total += 1
                self._cut_off_log.warning(
                    "cut-off",
                    "tap reader cut off: it read nothing for %.0f s; %d bytes of queued "
                    "events freed",
                    STALLED_SECONDS,
                    freed,
                )

    def close(self) -> None:
        """End every stream (server shutdown), so no tap holds up the drain."""
        self.closed = True
        for subscription in self._subscriptions:
            subscription.close()

    async def on_shutdown(self, app: object) -> None:
        """``on_shutdown`` hook: aiohttp runs it before waiting for in-flight requests."""
        self.close()

    def collect(self) -> Iterator[Metric]:
        subscribers = GaugeMetricFamily(
            "lineage_proxy_tap_subscribers", "Clients watching the live tap now."
        )
        subscribers.add_metric([], len(self._subscriptions))
        yield subscribers
        dropped = CounterMetricFamily(
            "lineage_proxy_tap_dropped",
            "Events not shown to a tap subscriber because it read too slowly.",
        )
        dropped.add_metric([], self.dropped_total)
        yield dropped
        cut_off = CounterMetricFamily(
            "lineage_proxy_tap_readers_cut_off",
            "Tap readers disconnected because they had read nothing for 10 s when"
            " server.max_queued_bytes refused some queue an event; what they held was freed.",
        )
        cut_off.add_metric([], self.cut_off_total)
        yield cut_off
