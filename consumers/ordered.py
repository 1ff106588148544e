"""Delivery in the order the proxy acknowledged events, across partitions and runs.

What Marquez shows depends on the order events arrive: which dataset version a run reads,
a dataset's fields, a job's latest version, a namespace's ``createdAt``. A run's events
share a key and so a partition, but a run and the one that wrote its input, or a parent
and its children, sit in different partitions; lanes per key delivered them in whatever
order the lanes ran. For such a target the daemon delivers in *acknowledgement order*:

1. :class:`ReorderBuffer` merges the assigned partitions by the stamp the proxy put on
   each record when it took the event (proxy/kafka/order_stamp.py). Each
   partition stays in offset order; across partitions the record with the lowest stamp
   goes first. A record waits until every other assigned partition has a record after
   it (then nothing earlier can still come from there) or until it has waited the
   reorder window (a partition with nothing new must not hold the others back). A
   partition known to hold records not fetched yet (its high watermark ahead of the next
   offset to fetch: a backlog whose fetch lags) holds the others past the window, for up
   to ``max_hold_seconds``, while the buffer has room. A record goes by the window only
   once the brokers were asked for the high watermarks after it came
   (:attr:`ReorderBuffer.wants_watermarks`): an event acknowledged before this record was
   written is below its partition's high watermark by then, so a partition whose fetch
   merely runs late (a busy broker, a loaded machine) is waited for, not overtaken.
2. :class:`ConflictGate` lets records that share nothing run side by side: an event
   starts only when no earlier event — in flight, or still waiting — names the same run,
   job, dataset or (the first time one is seen) namespace. Events that touch the same
   thing reach the target one after another, in merged order, so the target sees what it
   would have seen had every event been sent one at a time in that order. A few events
   ahead of the merge are looked at (:class:`Lookahead`), so that one event waiting for
   its target (retried, or its dead letter not yet written) holds back only the events
   that name what it names, not every event behind it.

What remains (docs/consumers/ordering.md): records written to Kafka later than the
window after later-stamped ones were fetched (a spool drained after an outage) are
delivered when they come; order is kept within one consumer process, across the
partitions it holds.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Message

from consumers.poison import parse_event
from proxy.kafka.order_stamp import stamp_of

__all__ = ["ConflictGate", "Lookahead", "ReorderBuffer", "Waiting", "entities_of"]

Partition = tuple[str, int]


class ReorderBuffer:
    """Records of the assigned partitions, released in stamp order (see module doc).

    ``full_records`` / ``full_bytes``: past either the buffer counts as full and no
    partition holds the others past the window (the daemon sets half of its fetch bounds,
    so that a lagging partition is waited for while there is room to fetch it)."""

    def __init__(
        self,
        window_seconds: float,
        *,
        max_hold_seconds: float = 30.0,
        full_records: int = 5_000,
        full_bytes: int = 8 * 1024 * 1024,
    ) -> None:
        self.window = window_seconds
        self.max_hold = max(max_hold_seconds, window_seconds)
        self._full_records = full_records
        self._full_bytes = full_bytes
        self._queues: dict[Partition, deque[tuple[int, float, Message]]] = {}
        # Per partition: the next offset to fetch (None: not known) and the high watermark.
        self._next: dict[Partition, int | None] = {}
        self._high: dict[Partition, int] = {}
        # When the brokers were last asked for the high watermarks (not a cached answer):
        # a record fetched before then may go by the window, one fetched after may not yet.
        self._asked_at = float("-inf")
        self.wants_watermarks = False
        """Whether a record waits for the brokers' high watermarks (see :meth:`watermarks`)."""
        self._size = 0
        self._bytes = 0

    def __len__(self) -> int:
        return self._size

    def assign(
        self,
        partitions: Iterable[Partition],
        positions: Mapping[Partition, tuple[int, int]] | None = None,
    ) -> None:
        """``positions``: per partition, where the source could tell, the offset fetching
        starts at and the high watermark then."""
        for partition in partitions:
            self._queues.setdefault(partition, deque())
            start, high = (positions or {}).get(partition, (None, None))
            self._next[partition] = start
            if high is not None:
                self._high[partition] = high

    def watermarks(self, highs: Mapping[Partition, int], asked_at: float | None = None) -> None:
        """The partitions' high watermarks: as last fetched, or, with ``asked_at``, as the
        brokers answered when asked at that moment (on the clock of ``add``'s ``now``;
        whatever partitions they answered for)."""
        for partition, high in highs.items():
            if partition in self._queues:
                self._high[partition] = max(high, self._high.get(partition, high))
        if asked_at is not None and asked_at > self._asked_at:
            self._asked_at = asked_at
            self.wants_watermarks = False

    def partitions(self) -> list[Partition]:
        """The partitions merged (assigned)."""
        return list(self._queues)

    def skip(self, partition: Partition, offset: int) -> None:
        """``offset`` was fetched but takes no place in the merge (finished already)."""
        if partition in self._queues:
            self._next[partition] = offset + 1

    def drop(self, partitions: Iterable[Partition]) -> list[Message]:
        """Forget ``partitions`` (revoked or lost); returns the records they held."""
        dropped: list[Message] = []
        for partition in partitions:
            queue = self._queues.pop(partition, None)
            self._next.pop(partition, None)
            self._high.pop(partition, None)
            if queue:
                dropped.extend(message for _, _, message in queue)
        self._size -= len(dropped)
        self._bytes -= sum(len(message) for message in dropped)
        return dropped

    def drop_all(self) -> list[Message]:
        return self.drop(list(self._queues))

    def add(self, partition: Partition, message: Message, now: float) -> None:
        """Queue ``message`` (fetched at ``now``). A record without a stamp (written by
        another producer) takes Kafka's own timestamp, in the same unit."""
        queue = self._queues.get(partition)
        if queue is None:
            return
        stamp = stamp_of(message.headers())
        if stamp is None:
            _, millis = message.timestamp()
            stamp = max(millis, 0) * 1_000_000
        queue.append((stamp, now, message))
        self._next[partition] = (message.offset() or 0) + 1
        self._size += 1
        self._bytes += len(message)

    def _first(self) -> tuple[Partition, tuple[int, float, Message]] | None:
        heads = [(queue[0], partition) for partition, queue in self._queues.items() if queue]
        if not heads:
            return None
        head, partition = min(heads, key=lambda item: (item[0][0], item[1]))
        return partition, head

    def _lagging(self, partition: Partition) -> bool:
        """Another partition, empty here, known to hold records not fetched yet."""
        for other, queue in self._queues.items():
            if other != partition and not queue:
                start, high = self._next.get(other), self._high.get(other)
                if start is not None and high is not None and start < high:
                    return True
        return False

    def peek(self, now: float) -> Message | None:
        """The next record in stamp order if it may go now, else None."""
        first = self._first()
        if first is None:
            return None
        partition, (_, fetched, message) = first
        waited = now - fetched
        if all(queue for other, queue in self._queues.items() if other != partition):
            return message  # every other partition has a later record: nothing can overtake
        # Whether another partition holds something earlier not fetched yet is known only
        # from high watermarks asked for after this record came: asked for at once, the
        # answer is in long before the window has passed.
        unconfirmed = self._asked_at < fetched
        if unconfirmed:
            self.wants_watermarks = True
        if waited < self.window:
            return None
        holding = waited < self.max_hold and not self.full
        if holding and (unconfirmed or self._lagging(partition)):
            return None  # not known yet, or a partition's backlog is being fetched
        return message

    @property
    def full(self) -> bool:
        return self._size >= self._full_records or self._bytes >= self._full_bytes

    def pop(self, message: Message) -> None:
        """Take ``message``, which :meth:`peek` returned."""
        queue = self._queues[_partition(message)]
        assert queue[0][2] is message
        queue.popleft()
        self._size -= 1
        self._bytes -= len(message)

    def wait_seconds(self, now: float) -> float | None:
        """How long until the first record may go by the window (or, when a lagging
        partition holds it, by ``max_hold_seconds``); None when empty."""
        first = self._first()
        if first is None:
            return None
        fetched = first[1][1]
        if now - fetched < self.window:
            return fetched + self.window - now
        return max(0.0, fetched + self.max_hold - now)


class ConflictGate:
    """What the events in flight name; an event waits while any of its names is taken.

    A namespace counts only until an event naming it was delivered once: it is created
    by the first event that names it (its ``createdAt`` is that event's time), and later
    events only read it — so the first one goes alone, and the rest need not queue."""

    def __init__(self, max_namespaces: int = 100_000) -> None:
        self._taken: dict[str, int] = {}
        self._known_namespaces: OrderedDict[str, None] = OrderedDict()
        # Bumped when a namespace becomes known: what conflicts may have shrunk.
        self.generation = 0
        self._max_namespaces = max_namespaces

    def names(self, event: dict[str, Any] | None) -> frozenset[str]:
        """Everything ``event`` names (:func:`entities_of`); see :meth:`now`."""
        return frozenset(entities_of(event)) if event is not None else frozenset()

    def now(self, names: frozenset[str]) -> frozenset[str]:
        """Of ``names``, those an earlier event still conflicts on: namespaces created by
        now are left out (asked at each attempt, so a namespace created while an event
        waited no longer holds it back)."""
        return frozenset(
            name
            for name in names
            if not (name.startswith("ns:") and name[3:] in self._known_namespaces)
        )

    def free(self, names: frozenset[str]) -> bool:
        return not any(name in self._taken for name in names)

    def take(self, names: frozenset[str]) -> None:
        for name in names:
            self._taken[name] = self._taken.get(name, 0) + 1

    def release(self, names: frozenset[str], delivered: bool) -> None:
        for name in names:
            left = self._taken[name] - 1
            if left:
                self._taken[name] = left
            else:
                del self._taken[name]
            if delivered and name.startswith("ns:"):
                if name[3:] not in self._known_namespaces:
                    self.generation += 1
                self._known_namespaces[name[3:]] = None
                if len(self._known_namespaces) > self._max_namespaces:
                    self._known_namespaces.popitem(last=False)


@dataclass(slots=True)
class Waiting:
    """An event taken from the merge, not started yet; once started, ``names`` is what
    it took in the gate (to release)."""

    message: Message
    event: dict[str, Any] | None
    names: frozenset[str]
    # ``names`` less the namespaces created, as of gate generation ``checked``.
    conflicts: frozenset[str] = frozenset()
    checked: int = -1


class Lookahead:
    """The next events of the merge, in order, up to ``size``: an event starts when the
    gate is free for its names and no event before it here names any of them."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: list[Waiting] = []

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def full(self) -> bool:
        return len(self._entries) >= self.size

    def fill(self, reorder: ReorderBuffer, gate: ConflictGate, now: float) -> None:
        """Take what the reorder buffer lets go, in order, while there is room."""
        while not self.full and (message := reorder.peek(now)) is not None:
            reorder.pop(message)
            event = parse_event(message.value() or b"")
            self._entries.append(Waiting(message, event, gate.names(event)))

    def start(self, gate: ConflictGate, slots: int) -> list[Waiting]:
        """The events that may start now (at most ``slots``), taken from here with their
        names taken in ``gate``; the others keep their places."""
        started: list[Waiting] = []
        kept: list[Waiting] = []
        held: set[str] = set()  # names of earlier events that stay
        for index, waiting in enumerate(self._entries):
            if len(started) == slots:
                kept.extend(self._entries[index:])  # no slot left: the rest keep their places
                break
            if waiting.checked != gate.generation:  # a namespace was created since
                waiting.conflicts, waiting.checked = gate.now(waiting.names), gate.generation
            names = waiting.conflicts
            if gate.free(names) and held.isdisjoint(names):
                gate.take(names)
                waiting.names = names
                started.append(waiting)
            else:
                kept.append(waiting)
                held.update(names)
        self._entries = kept
        return started

    def drop(self, partitions: Iterable[Partition]) -> list[Message]:
        """Forget the events of ``partitions`` (revoked or lost); returns their records."""
        gone = set(partitions)
        dropped = [w.message for w in self._entries if _partition(w.message) in gone]
        self._entries = [w for w in self._entries if _partition(w.message) not in gone]
        return dropped

    def drop_all(self) -> list[Message]:
        dropped = [w.message for w in self._entries]
        self._entries = []
        return dropped


def _partition(message: Message) -> Partition:
    return (message.topic() or "", message.partition() or 0)


def entities_of(event: dict[str, Any]) -> Iterator[str]:
    """Every run, job, dataset and namespace an event names, as Marquez stores them: its
    run and job, the parent and root run and job of its parent facet, each input and
    output dataset (with their symlinks and the datasets column lineage reads from), a
    DatasetEvent's dataset, and the namespaces of all of these."""
    run = _dict(event.get("run"))
    if isinstance(run_id := run.get("runId"), str):
        yield f"run:{run_id}"
    yield from _job(event.get("job"))
    parent = _dict(_dict(run.get("facets")).get("parent"))
    for holder in (parent, _dict(parent.get("root"))):
        if isinstance(run_id := _dict(holder.get("run")).get("runId"), str):
            yield f"run:{run_id}"
        yield from _job(holder.get("job"))
    yield from _dataset(event.get("dataset"))
    for side in ("inputs", "outputs"):
        datasets = event.get(side)
        for dataset in datasets if isinstance(datasets, list) else ():
            yield from _dataset(dataset)
            facets = _dict(_dict(dataset).get("facets"))
            for identifier in _list(_dict(facets.get("symlinks")).get("identifiers")):
                yield from _dataset(identifier)
            for field in _dict(_dict(facets.get("columnLineage")).get("fields")).values():
                for source in _list(_dict(field).get("inputFields")):
                    yield from _dataset(source)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _job(job: Any) -> Iterator[str]:
    return _named("job", job)


def _dataset(dataset: Any) -> Iterator[str]:
    return _named("dataset", dataset)


def _named(kind: str, holder: Any) -> Iterator[str]:
    """``ns:{namespace}`` and ``{kind}:{namespace}/{name}`` of a job or dataset object."""
    holder = _dict(holder)
    namespace, name = holder.get("namespace"), holder.get("name")
    if isinstance(namespace, str):
        yield f"ns:{namespace}"
        if isinstance(name, str):
            yield f"{kind}:{namespace}/{name}"
