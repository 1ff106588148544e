"""What librdkafka says, through our logger: one line per outage of a cluster, not 20 a second.

Left alone, every librdkafka client (producer, consumer, admin, dead letters, replay) of
an unreachable cluster prints a raw ``%3|…|FAIL|`` line to stderr on each reconnect
attempt — about twenty a second per client, forever, outside our log format. Every
client we create is therefore built with :func:`kafka_client_config`, which hands
librdkafka a ``logger``, an ``error_cb`` and a ``stats_cb`` that all report to one
:class:`ClusterLog` per cluster (per bootstrap servers string):

- when no broker answers (or authentication fails), one WARNING ``cannot reach Kafka
  at X: <reason>``; while the outage lasts, at most one ``still cannot reach …`` line
  per :data:`REPEAT_SECONDS`. A refused authentication (a wrong SASL password, an
  unknown user) says so and what to check (:data:`CHECK_CREDENTIALS`), and is kept in
  :attr:`ClusterLog.authentication_error` for readiness to report;
- when a broker answers again (librdkafka's statistics show a broker that is ``UP`` and
  received responses since the last statistics — a connection alone is no answer: a
  frozen broker's kernel still accepts connections), one INFO ``Kafka at X reachable
  again``;
- one broker failing while the others answer is logged only once it has failed for
  :data:`BROKER_GRACE_SECONDS`, then at most once per :data:`REPEAT_SECONDS`;
- any other librdkafka log line or error goes to the ``librdkafka`` logger, at most once
  per :data:`REPEAT_SECONDS` per kind, with the count of those left out.

Callbacks run on whatever thread serves the client (``poll()``/``consume()``), so the
state is guarded by a lock. Admin clients are never polled: their lines are dropped
with them, which is what we want (the producer of the same cluster reports the outage).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

__all__ = [
    "BROKER_GRACE_SECONDS",
    "CHECK_CREDENTIALS",
    "REPEAT_SECONDS",
    "ClusterLog",
    "cluster_log",
    "failure_reason",
    "kafka_client_config",
]

log = logging.getLogger(__name__)
_librdkafka = logging.getLogger("librdkafka")

# What an operator checks when the cluster refuses our credentials.
CHECK_CREDENTIALS = (
    "check sasl.username and sasl.password (or sasl.password_env) under kafka.producer, "
    "sasl.mechanisms, and that the user exists on the cluster"
)

# The least time between two lines about one ongoing problem.
REPEAT_SECONDS = 60.0
# How often librdkafka hands over its statistics: how soon a recovery is noticed.
_STATS_INTERVAL_MS = 5000

# How long one broker may keep failing, while the cluster answers, before it is logged.
BROKER_GRACE_SECONDS = 10.0
_NO_REASON = "no reason given by librdkafka"

# librdkafka error codes (confluent_kafka.KafkaError's), written out so that this module
# needs no librdkafka to be imported. No broker answers / none lets us in:
_ALL_BROKERS_DOWN, _AUTHENTICATION = -187, -169
# (client, broker) pairs whose response counts are remembered.
_MAX_TRACKED_CONNECTIONS = 1024
# One broker's connection failed (the cluster may still answer through others):
_BROKER_CODES = frozenset({-195, -193, -181})  # _TRANSPORT, _RESOLVE, _SSL
# librdkafka log facilities of a failed connection (the same news as the errors above).
_BROKER_FACILITIES = frozenset({"FAIL", "ERROR", "RESOLVE", "SSL", "SASL", "AUTH"})


class _KafkaError(Protocol):
    """What this module reads of confluent_kafka.KafkaError."""

    def code(self) -> int: ...
    def name(self) -> str: ...
    def str(self) -> str: ...


@dataclass(slots=True)
class _Throttled:
    last_logged: float
    left_out: int = 0


class ClusterLog:
    """Everything librdkafka reports about one cluster, logged with throttling.

    Two kinds of trouble are told apart. The cluster is *unreachable* when librdkafka
    says all its brokers are down (or authentication fails): one WARNING at once, then at
    most one a minute, and one INFO when a broker is connected again. A *broker* failing
    while others answer (one broker of three restarting) is no outage: it is logged only
    if it keeps failing for :data:`BROKER_GRACE_SECONDS`, then at most once a minute.
    """

    def __init__(
        self,
        servers: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        repeat_seconds: float = REPEAT_SECONDS,
    ) -> None:
        self.servers = servers
        self._clock = clock
        self._repeat = repeat_seconds
        self._lock = threading.Lock()
        # Since when (clock) no broker answers; None while one does (or nothing was tried).
        self.unreachable_since: float | None = None
        self._unreachable_logged = 0.0
        self._unreachable_left_out = 0
        # The latest failed connection's words ("Connect to … failed: Connection refused"):
        # librdkafka's "1/1 brokers are down" says less.
        self._last_reason = ""
        # A run of broker failures outside an outage: when it began, the latest one.
        self._broker_failing_since: float | None = None
        self._broker_failed_last = 0.0
        self._other: dict[str, _Throttled] = {}
        # Responses received per broker at the last statistics (librdkafka's ``rx``).
        # (client, broker) → responses received; bounded (clients come and go).
        self._responses: OrderedDict[tuple[str, str], int] = OrderedDict()
        # Statistics documents read so far (how a test knows some were read in an outage).
        self.statistics = 0
        # Failed connections and refusals librdkafka reported (each one, logged or not):
        # ``lineage_proxy_kafka_connection_failures_total``.
        self.failures = 0
        # Why the cluster refused our credentials, until a broker answers again.
        self.authentication_error: str | None = None

    # ---- the three callbacks librdkafka is given ----

    def log(self, level: int, fmt: str, *args: object) -> None:
        """confluent-kafka's ``logger=`` interface; it calls
        ``log(level, "%s [%s] %s", facility, client name, text)``."""
        text = fmt % args if args else fmt
        facility = str(args[0]) if args else ""
        if facility in _BROKER_FACILITIES and level >= logging.WARNING:
            self.broker_failed(_without_thread(str(args[-1])) if args else text)
        else:
            self._other_line(f"log:{facility}", level, text)

    def error(self, error: _KafkaError) -> None:
        """``error_cb``: a client-wide error (not one message's)."""
        reason = _reason(error)
        if error.code() == _ALL_BROKERS_DOWN:
            self.unreachable(self._last_reason or reason)
        elif error.code() == _AUTHENTICATION:
            with self._lock:
                self.authentication_error = reason
            self.unreachable(reason)
        elif error.code() in _BROKER_CODES:
            self.broker_failed(reason)
        else:
            self._other_line(f"error:{error.code()}", logging.WARNING, f"Kafka error: {reason}")

    def stats(self, document: str) -> None:
        """``stats_cb``: librdkafka's statistics; a broker that answered ends an outage."""
        try:
            statistics = orjson.loads(document)
            brokers, client = statistics.get("brokers", {}), str(statistics.get("name"))
        except (orjson.JSONDecodeError, AttributeError):
            return
        answered = False
        with self._lock:
            self.statistics += 1
            for name, broker in brokers.items() if isinstance(brokers, dict) else ():
                if not isinstance(broker, dict) or not isinstance(broker.get("rx"), int):
                    continue
                # Per client: two clients of one cluster name its brokers alike, and one
                # client's count after another's lower one is no answer. A client's
                # first report is its baseline (it may count answers from before an
                # outage).
                before = self._responses.get((client, name), broker["rx"])
                self._responses[(client, name)] = broker["rx"]
                self._responses.move_to_end((client, name))
                if len(self._responses) > _MAX_TRACKED_CONNECTIONS:
                    self._responses.popitem(last=False)
                if broker.get("state") == "UP" and broker["rx"] > before:
                    answered = True
        if answered:
            self.reachable()

    # ---- what they mean ----

    def broker_failed(self, reason: str) -> None:
        """A connection to one broker (or its name resolution) failed."""
        reason = reason.strip() or _NO_REASON
        with self._lock:
            self.failures += 1
            self._last_reason = reason
            now = self._clock()
            in_outage = self.unreachable_since is not None
            if not in_outage:
                if (
                    self._broker_failing_since is None
                    or now - self._broker_failed_last > self._repeat
                ):
                    self._broker_failing_since = now
                self._broker_failed_last = now
                if now - self._broker_failing_since < BROKER_GRACE_SECONDS:
                    return
        if in_outage:
            self.unreachable(reason)  # counted, and one "still" line a minute
        else:
            text = f"a broker of Kafka at {self.servers} keeps failing: {reason}"
            self._other_line("broker", logging.WARNING, text, logger=log)

    def refused_credentials(self) -> str | None:
        """While the cluster refuses our credentials: why, and what to check."""
        refused = self.authentication_error
        return (
            None if refused is None else f"authentication refused: {refused}; {CHECK_CREDENTIALS}"
        )

    def unreachable(self, reason: str) -> None:
        """No broker of the cluster answers (or none lets us in)."""
        reason = reason.strip() or _NO_REASON
        args: tuple[object, ...]
        with self._lock:
            self.failures += 1
            reason = self.refused_credentials() or reason  # each line says what to check
            now = self._clock()
            if self.unreachable_since is None:
                self.unreachable_since = self._unreachable_logged = now
                self._unreachable_left_out = 0
                message, args = "cannot reach Kafka at %s: %s", (self.servers, reason)
            elif now - self._unreachable_logged >= self._repeat:
                message = "still cannot reach Kafka at %s after %.0f s (%d failures): %s"
                args = (
                    self.servers,
                    now - self.unreachable_since,
                    self._unreachable_left_out + 1,
                    reason,
                )
                self._unreachable_logged, self._unreachable_left_out = now, 0
            else:
                self._unreachable_left_out += 1
                return
        log.warning(message, *args)

    def reachable(self) -> None:
        """A broker of the cluster is connected: log the end of an outage, if any."""
        with self._lock:
            self.authentication_error = None
            if self.unreachable_since is None:
                return
            lasted = self._clock() - self.unreachable_since
            self.unreachable_since = self._broker_failing_since = None
        log.info("Kafka at %s reachable again (after %.0f s)", self.servers, lasted)

    def _other_line(
        self, kind: str, level: int, text: str, logger: logging.Logger = _librdkafka
    ) -> None:
        with self._lock:
            now = self._clock()
            seen = self._other.get(kind)
            if seen is not None and now - seen.last_logged < self._repeat:
                seen.left_out += 1
                return
            left_out = seen.left_out if seen is not None else 0
            self._other[kind] = _Throttled(now)
        if left_out:
            text += f" ({left_out} more like it in the last {self._repeat:.0f} s)"
        logger.log(level, "%s", text)


def failure_reason(exc: BaseException) -> str:
    """A failed Kafka call (an admin request, a metadata request…) in words, never empty:
    a KafkaException's error text rather than its repr, a timeout said as such."""
    error = exc.args[0] if exc.args else None
    if all(hasattr(error, name) for name in ("code", "name", "str")):
        return _reason(error)  # type: ignore[arg-type]
    if isinstance(exc, TimeoutError):
        return "Kafka did not answer in time"
    return str(exc) or type(exc).__name__


def _reason(error: _KafkaError) -> str:
    """What went wrong, never empty: librdkafka leaves ``str()`` empty for some codes."""
    return _without_thread(error.str()) or error.name() or f"error {error.code()}"


def _without_thread(text: str) -> str:
    """``[thrd:host:port/bootstrap]: host:port/bootstrap: Connect…`` → ``Connect…``;
    librdkafka's guess about old brokers replaced by what a timeout means."""
    text = text.strip()
    if text.startswith("[thrd:"):
        text = text.partition("]: ")[2] or text
    head, sep, rest = text.partition(": ")
    if sep and "/" in head and " " not in head:  # "host:port/id: " of the broker
        text = rest
    return _truer_hint(text)


# librdkafka adds this guess to any ApiVersionRequest that timed out; brokers older than
# Kafka 0.10 (2016) are long gone, and the usual cause is a broker that accepts
# connections but does not answer.
_OLD_BROKER_GUESS = (
    ": probably due to broker version < 0.10 (see api.version.request configuration)"
)
_TIMEOUT_MEANS = (
    ": the broker accepted the connection but did not answer in time "
    "(frozen, overloaded, or its disk stalled)"
)


def _truer_hint(text: str) -> str:
    if _OLD_BROKER_GUESS in text and "Timed out" in text:
        return text.replace(_OLD_BROKER_GUESS, _TIMEOUT_MEANS)
    return text


# One per cluster in this process: however many clients talk to a cluster (producers,
# consumers, admin clients, their replacements), an outage is one line. Keyed by the
# bootstrap servers string, the name operators know the cluster by.
_clusters: dict[str, ClusterLog] = {}
_clusters_lock = threading.Lock()


def cluster_log(servers: str) -> ClusterLog:
    """The :class:`ClusterLog` of the cluster at ``servers`` (created on first use)."""
    with _clusters_lock:
        found = _clusters.get(servers)
        if found is None:
            found = _clusters[servers] = ClusterLog(servers)
        return found


def kafka_client_config(
    settings: Mapping[str, Any], on_error: Callable[[Any], None] | None = None
) -> dict[str, Any]:
    """The config of a librdkafka client built from ``settings`` (``connection_settings``'
    output and more): its logs, errors and statistics go to the cluster's
    :class:`ClusterLog`; ``on_error``, the client's own error callback, still gets every
    error after that."""
    cluster = cluster_log(str(settings.get("bootstrap.servers", "")))

    def error_cb(error: Any) -> None:
        cluster.error(error)
        if on_error is not None:
            on_error(error)

    return {
        "statistics.interval.ms": _STATS_INTERVAL_MS,
        **settings,
        "logger": cluster,
        "error_cb": error_cb,
        "stats_cb": cluster.stats,
    }
