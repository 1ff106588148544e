"""Kafka destination: one topic, a message key and headers computed from each event, and
the outage spool in front of the shared :class:`~proxy.kafka.producer.
KafkaProducer` (which resolves a delivery once the broker has it, acks=all).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from proxy.destinations.base import DeliveryError, Destination, TooLarge
from proxy.destinations.deliver_each import deliver_each
from proxy.destinations.hops import kafka_headers as hop_headers
from proxy.destinations.kafka.config import KafkaDestinationConfig
from proxy.destinations.kafka.spool import SpoolRefused
from proxy.destinations.kafka.spool_drainer import KafkaSpool
from proxy.kafka.client_logs import CHECK_CREDENTIALS, cluster_log
from proxy.kafka.keys import key_function
from proxy.kafka.order_stamp import ORDER_HEADER, next_stamp
from proxy.kafka.producer import KafkaProducer, refused_for_good
from proxy.kafka.replicas import replication_shortfall
from proxy.openlineage import event_key, event_kind, subject_name
from proxy.openlineage.repaired import RepairedEvent
from proxy.openlineage.times import utc_timestamp

if TYPE_CHECKING:
    from proxy.destinations.registry import DestinationResources

__all__ = [
    "RECORD_RESERVE_BYTES",
    "KafkaDestination",
    "event_headers",
    "message_bytes",
]

log = logging.getLogger(__name__)


def event_headers(event: dict[str, Any]) -> list[tuple[str, bytes]]:
    """Headers that let consumers filter without parsing the JSON body."""
    headers: list[tuple[str, bytes]] = []
    kind = event_kind(event)
    if kind is not None:
        headers.append(("ol_kind", kind.value.encode()))
    event_type = event.get("eventType")
    if isinstance(event_type, str):
        headers.append(("ol_event_type", event_type.encode()))
    if (subject := subject_name(event)) is not None:
        headers.append(("ol_namespace", subject[0].encode()))
        headers.append(("ol_name", subject[1].encode()))
    producer = event.get("producer")
    if isinstance(producer, str):
        headers.append(("ol_producer", producer.encode()))
    if isinstance(event, RepairedEvent):
        headers.append(("ol_repairs", event.header_value()))
    # An event that came through another proxy keeps the count (loop guard).
    headers.extend(hop_headers())
    return headers


def _order_header() -> tuple[str, bytes]:
    """The acknowledgement-order stamp of a record written now (see order_stamp)."""
    return ORDER_HEADER, str(next_stamp()).encode()


# Of a message's size limit, what is kept for the record framing (record batch and
# record headers, varints); the key and the headers are counted as they are.
RECORD_RESERVE_BYTES = 512

READINESS_INTERVAL_SECONDS = 1.0
"""Pause between two readiness checks of the cluster (each is a metadata request while
Kafka is healthy; up to two 2 s requests while it is not)."""
READINESS_STUCK_SECONDS = 15.0
"""A readiness check not finished this long after the last one is stuck: the cluster is
then taken as not answering (its checks' own timeouts make 5 s the longest normal gap)."""

# Per header: its varint lengths.
_HEADER_FRAMING = 10
# Fields of an event that its key and headers repeat (ol_namespace, ol_name, ol_producer,
# job:/dataset:{namespace}/{name}; a run's key repeats only its runId, a UUID): the one to
# shorten when only these copies make a message too large.
_REPEATED_FIELDS = (
    ("job", "name"),
    ("job", "namespace"),
    ("dataset", "name"),
    ("dataset", "namespace"),
    ("producer",),
)


def message_bytes(key: str | None, headers: Sequence[tuple[str, bytes]], value: bytes) -> int:
    """A message's size as Kafka's ``message.max.bytes`` counts it, framing aside."""
    size = len(value) + (len(key.encode()) if key is not None else 0)
    for name, header in headers:
        size += len(name.encode()) + len(header) + _HEADER_FRAMING
    return size


def _longest_repeated_field(event: dict[str, Any]) -> str:
    """JSON pointer of the longest string among the fields key and headers repeat."""
    best, best_length = "", -1
    for path in _REPEATED_FIELDS:
        value: Any = event
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, str) and len(value) > best_length:
            best, best_length = "/" + "/".join(path), len(value)
    return best


# One message of a KafkaDestination: key, headers, payload.
_Send = tuple[str | None, list[tuple[str, bytes]], bytes]


class KafkaDestination(Destination):
    """Deliver events to one topic with a message key computed from the event.

    With a spool, an event the broker cannot confirm in time (or while it is known to be
    down) is appended to the spool instead and the delivery counts as done once fsynced;
    so are later events with the same key until the spool has drained them, so that
    Kafka receives each key's events in the order they were accepted.
    """

    durable = True

    def __init__(
        self,
        name: str,
        producer: KafkaProducer,
        topic: str,
        *,
        key_for: Callable[[dict[str, Any]], str | None] = event_key,
        extra_headers: Mapping[str, str] | None = None,
        spool: KafkaSpool | None = None,
        spool_after_seconds: float | None = None,
    ) -> None:
        self.name = name
        self.topic = topic
        self._producer = producer
        self._key_for = key_for
        self._extra_headers = [(k, v.encode()) for k, v in (extra_headers or {}).items()]
        self._spool = spool
        # With a spool, how long a direct send may wait for the broker before the event is
        # spooled instead: below the ~5 s after which clients give up and resend.
        self._spool_after = spool_after_seconds if spool is not None else None
        # Per key: the latest direct send still waiting for the broker, and how many
        # events are on their way into the spool — a later event of that key must not
        # overtake either.
        self._direct: dict[str | None, asyncio.Future[None]] = {}
        self._to_spool: Counter[str | None] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        # Largest message (payload, key and headers) and payload the topic takes; known
        # before anything is written anywhere so that an oversized event is refused (413)
        # rather than half stored or spooled and then refused by Kafka.
        self.max_message_bytes: int | None = None
        # Whether the broker answered at the last readiness check; None before the first.
        self._reachable: bool | None = None
        # Why Kafka refuses writes, as the cluster said at the last readiness check.
        self._kafka_says: str | None = None
        # When the last readiness check finished (monotonic): /readyz answers from what
        # it found, never waiting for a broker (see :meth:`ready`).
        self._checked_at: float | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._admin: AdminClient | None = None

    async def start(self) -> None:
        """Learn the topic's message size limit; the shared producer's lifetime is owned
        by whoever created it."""
        producer = self._producer
        # A broker that is down cannot say: then the producer's own limit holds.
        ask = await asyncio.to_thread(producer.cluster_reachable, 1.0)
        limit = await asyncio.to_thread(producer.message_limit, self.topic, ask)
        self.max_message_bytes = limit - RECORD_RESERVE_BYTES
        await self._check()
        self._watcher = asyncio.create_task(self._watch(), name=f"readiness-{self.name}")

    def max_payload_bytes(self) -> int | None:
        """The topic's limit less a reserve for the record's framing (known after start)."""
        return self.max_message_bytes

    def refuses_size(self, event: dict[str, Any], payload: bytes) -> TooLarge | None:
        """Why the topic could never take this event — the payload with the key and
        headers this destination adds — or None. Checked before any destination writes.

        Key and headers copy strings of the event, so an event under an eighth of the
        limit cannot reach it with them (a key template repeating one field eight times
        aside); only larger ones are measured."""
        limit = self.max_message_bytes
        if limit is None or len(payload) <= limit // 8:
            return None
        key = self._key_for(event)
        headers = [*event_headers(event), *self._extra_headers, _order_header()]
        size = message_bytes(key, headers, payload)
        if size <= limit:
            return None
        if len(payload) > limit:
            return TooLarge(self.name, len(payload), limit)
        return TooLarge(
            self.name,
            size,
            limit,
            pointer=_longest_repeated_field(event),
            what="the Kafka message (the event, its key and its headers)",
        )

    async def deliver(self, event: dict[str, Any], payload: bytes) -> bool:
        """Return True when the event went to the spool rather than straight to Kafka."""
        [outcome] = await self.deliver_many([(event, payload)])
        if isinstance(outcome, DeliveryError):
            raise outcome
        return outcome

    async def deliver_many(
        self, items: Sequence[tuple[dict[str, Any], bytes]]
    ) -> list[bool | DeliveryError]:
        """:meth:`deliver` for many events at once, in order, awaiting one future for all
        of them; per event: spooled (True), sent (False) or why it was not stored."""
        sends = [
            (
                self._key_for(event),
                [*event_headers(event), *self._extra_headers, _order_header()],
                payload,
            )
            for event, payload in items
        ]
        if self._spool is not None and any(self._must_spool(key) for key, _, _ in sends):
            # Kafka is known down or a key waits in the spool: each event on its own way.
            return await deliver_each(self._deliver_one, sends)
        return await self._send(sends)

    async def _deliver_one(
        self, key: str | None, headers: list[tuple[str, bytes]], payload: bytes
    ) -> bool:
        if self._spool is not None and self._must_spool(key):
            await self._store(key, headers, payload, after=self._direct.get(key))
            return True
        [outcome] = await self._send([(key, headers, payload)])
        if isinstance(outcome, DeliveryError):
            raise outcome
        return outcome

    async def _send(self, sends: list[_Send]) -> list[bool | DeliveryError]:
        """Produce straight to Kafka; what it does not confirm in time goes to the spool."""
        # The loop once: on Python 3.11 every get_running_loop() is a getpid() system call.
        loop = self._loop = self._loop or asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        for key, _, _ in sends:
            # Until these sends settle, a later event of the key that must be spooled
            # waits for them (it must not overtake them into Kafka).
            self._direct[key] = done
        try:
            outcomes = await self._producer.produce_many(
                self.topic,
                [(payload, key, headers) for key, headers, payload in sends],
                wait_seconds=self._spool_after,
            )
            results: list[bool | DeliveryError] = []
            unconfirmed: list[int] = []
            for index, outcome in enumerate(outcomes):
                if not isinstance(outcome, KafkaException):
                    results.append(False)
                    continue
                err: KafkaError = outcome.args[0]
                # Everything but a message the broker will never take is worth retrying.
                permanent = refused_for_good(err)
                if permanent or self._spool is None:
                    results.append(DeliveryError(self.name, err.str(), retriable=not permanent))
                else:
                    results.append(True)
                    unconfirmed.append(index)
            if unconfirmed:
                stored = await deliver_each(self._spool_now, [sends[i] for i in unconfirmed])
                for index, spooled in zip(unconfirmed, stored, strict=True):
                    results[index] = spooled
            return results
        finally:
            done.set_result(None)
            for key, _, _ in sends:
                if self._direct.get(key) is done:
                    del self._direct[key]

    async def _spool_now(
        self, key: str | None, headers: list[tuple[str, bytes]], payload: bytes
    ) -> bool:
        await self._store(key, headers, payload, after=None)
        return True

    def _must_spool(self, key: str | None) -> bool:
        assert self._spool is not None
        return (
            not self._producer.delivering
            or self._to_spool[key] > 0
            or self._spool.holds(self.topic, key)
        )

    async def _store(
        self,
        key: str | None,
        headers: list[tuple[str, bytes]],
        payload: bytes,
        after: asyncio.Future[None] | None,
    ) -> None:
        assert self._spool is not None
        self._to_spool[key] += 1
        try:
            if after is not None:
                # An earlier direct send of this key may still land in the spool first.
                await asyncio.wait([after])
            await self._spool.store(self.topic, key, headers, payload)
        except SpoolRefused as exc:
            raise DeliveryError(
                self.name, f"Kafka did not confirm and the spool refused: {exc}", retriable=True
            ) from exc
        except OSError as exc:
            raise DeliveryError(
                self.name, f"Kafka did not confirm and the spool failed: {exc}", retriable=True
            ) from exc
        finally:
            self._to_spool[key] -= 1
            if self._to_spool[key] <= 0:
                del self._to_spool[key]

    async def ready(self) -> bool:
        """Ready when the broker answers and no spooled key is stuck behind a spool that
        refuses (full, disk failing or stalled, drain wedged); while the broker does not
        answer, ready only if it has answered once since start (so a wrong address never
        goes green) and the spool takes events for it — then :meth:`problem` says the
        proxy is degraded.

        Whether the broker answers is the verdict of the last check, made in the
        background every :data:`READINESS_INTERVAL_SECONDS` (and, while Kafka does not
        confirm, asking the cluster why: a replication shortfall): a check can take
        seconds while a broker is down or frozen, and a probe waiting for it would
        outlast the kubelet's 1 s timeout exactly when the spool should take events
        (every pod NotReady, the Service empty). Between checks, librdkafka saying every
        broker is down counts at once; a check not finished for
        :data:`READINESS_STUCK_SECONDS` counts as a broker that does not answer."""
        if self._watcher is None:  # not started: a check of its own, as before start
            await self._check()
        producer = self._producer
        if self._spool_holds_keys_it_refuses():
            return False
        if self._reachable and not self._cluster_down_now():
            return True
        if producer.answered_at is None:
            return False
        return self._spool is not None and self._spool.accepting

    def _spool_holds_keys_it_refuses(self) -> bool:
        """The spool refuses events while it holds some (later events of their keys
        would queue behind them) or while Kafka does not confirm: events get 503."""
        spool = self._spool
        return (
            spool is not None
            and spool.refusing_reason() is not None
            and (spool.spool.events > 0 or not self._producer.delivering)
        )

    def _cluster_down_now(self) -> bool:
        """librdkafka reports every broker down, or the last check is stuck."""
        servers = str(self._producer.settings.get("bootstrap.servers", ""))
        return (
            cluster_log(servers).unreachable_since is not None
            or self._check_stuck_for() is not None
        )

    def _check_stuck_for(self) -> float | None:
        """Seconds since the last check finished, when that is too long."""
        if self._checked_at is None:
            return None
        late = time.monotonic() - self._checked_at
        return late if late > READINESS_STUCK_SECONDS else None

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(READINESS_INTERVAL_SECONDS)
            try:
                await self._check()
            except Exception as exc:  # the next round tries again; readiness says stuck
                log.warning("%s: readiness check failed: %s", self.name, exc)

    async def _check(self) -> None:
        """Ask the cluster whether it answers and, while Kafka does not confirm, why."""
        producer = self._producer
        if self._spool is not None:
            await self._spool.recheck()
            if self._spool_holds_keys_it_refuses():
                # Not ready whatever the cluster says (see ready()): nothing to ask.
                self._kafka_says = self._reachable = None
                self._checked_at = time.monotonic()
                return
        kafka_says = None
        if not producer.delivering or (self._spool is not None and self._spool.spool.events):
            if self._admin is None:  # one for every check: each new client is a connection
                self._admin = producer.admin_client()
            kafka_says = await asyncio.to_thread(replication_shortfall, self._admin, self.topic)
        reachable = kafka_says is None and await asyncio.to_thread(producer.cluster_reachable, 2.0)
        self._kafka_says, self._reachable = kafka_says, reachable
        self._checked_at = time.monotonic()

    def problem(self) -> str | None:
        """What is wrong with this destination as of the last :meth:`ready`, in words an
        operator can act on; None when Kafka answers and the spool takes events."""
        if (stuck := self._check_stuck_for()) is not None:
            servers = self._producer.settings.get("bootstrap.servers", "?")
            return (
                f"the readiness check of Kafka at {servers} has not finished for "
                f"{stuck:.0f} s (a broker that does not answer); check the broker"
            )
        if self._spool is not None and (refusing := self._spool.refusing_reason()):
            return (
                f"the spool at {self._spool.spool.directory} refuses events ({refusing}); "
                "events Kafka does not confirm in time get 503 until it takes them again; "
                "check its disk and the broker"
            )
        if self._reachable is not False and not self._cluster_down_now():
            return None
        servers = self._producer.settings.get("bootstrap.servers", "?")
        if self._kafka_says is not None:
            return f"Kafka at {servers} refuses writes: {self._kafka_says}"
        answered = self._producer.answered_at
        refused = cluster_log(str(servers)).authentication_error
        if refused is not None:
            since = f"refuses our credentials ({refused})"
            action = CHECK_CREDENTIALS
        elif answered is None:
            started = utc_timestamp(self._producer.started_at)
            since = f"has not answered since the proxy started at {started}"
            action = "check kafka.bootstrap_servers and that the broker is up"
        else:
            since = f"has not answered since {utc_timestamp(answered)}"
            action = "check the broker"
        if self._spool is None:
            held = "events for it are refused with 503 (no spool)"
        elif not self._spool.accepting:
            held = (
                f"the spool at {self._spool.spool.directory} is full or failing, so "
                "events for it are refused with 503"
            )
        else:
            held = (
                f"{self._spool.spool.events} events are safe in the spool at "
                f"{self._spool.spool.directory}"
            )
        return f"Kafka at {servers} {since}; {held}; {action}"

    def readiness(self) -> dict[str, Any] | None:
        """What /readyz adds to its body for this destination: the spool's state, and what
        the cluster says when it refuses writes."""
        note = None if self._spool is None else self._spool.status()
        if self._kafka_says is not None:
            note = {**(note or {}), "kafka_says": self._kafka_says}
        return note

    async def close(self) -> None:
        """The readiness watcher ends; the shared producer is flushed by its owner."""
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
            self._watcher = None


async def build(
    name: str, config: KafkaDestinationConfig, resources: DestinationResources
) -> KafkaDestination:
    """An (unstarted) Kafka destination: the cluster's shared producer (a separate one when
    ``producer`` overrides differ), its topic ensured, the cluster's spool in front."""
    producer = resources.producer(config.producer, config.bootstrap_servers)
    topic = config.topic or resources.kafka.topic
    await resources.ensure_topic(producer, topic, config)
    return KafkaDestination(
        name,
        producer,
        topic,
        key_for=key_function(config.key),
        extra_headers=config.headers,
        spool=await resources.spool_for(producer),
        spool_after_seconds=resources.kafka.spool.after_seconds,
    )
