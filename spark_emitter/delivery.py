"""Deliver events through the official openlineage-python client, from a bounded queue
drained by a background thread.

The client brings the transports (http, kafka, file, console, composite…) and the
configuration users already know (``openlineage.yml``, ``OPENLINEAGE_*``); the Spark conf
mapping onto it is :func:`spark_emitter.config.spark_transport`. What the client does not
give, and a Spark listener needs, stays here: the Spark job must never wait for lineage,
so :meth:`EventSender.submit` only enqueues (and drops with a warning and a count when the
queue is full), a daemon thread hands each event to the client, and
:meth:`EventSender.close` drains within a bounded time so the last COMPLETE is not lost
when the driver exits — the disk buffer too, when the proxy answers by then: a driver's
disk may go away with it (a Kubernetes pod, YARN cluster mode).

Retries are the transport's: the http transport retries connection errors and 500, 502,
503, 504 five times with exponential backoff (urllib3 ``Retry``: total 5, backoff_factor
0.3, tunable through ``spark.openlineage.transport.retry.*`` or ``retry:`` in
``openlineage.yml``) — the policy the emitter's own HTTP code followed before; the kafka
transport has the producer's (``properties.retries``, ``delivery.timeout.ms``). A retry
in progress when :meth:`EventSender.close` gives up is not cut short: the thread is a
daemon and ends with the process.

The client's event classes are typed; our events are plain dicts. :func:`client_event`
wraps a dict in the client's ``RunEvent`` envelope (run, job, datasets) and keeps the
facets as the dicts they are — the client's ``Serde`` writes dicts as they are — except
the ``parent`` facet, which the kafka transport reads to choose the message key (the
root job's name, so one application's events share a partition), so it gets the
client's class.

openlineage-python is imported when a client is opened, not with this module: the
emitter's modules still import alone (``--py-files``), a driver that enables lineage
needs ``pip install openlineage-python`` (``openlineage-python[kafka]`` for kafka).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from spark_emitter.config import ConfigurationError

if TYPE_CHECKING:
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import InputDataset, OutputDataset, RunEvent
    from openlineage.client.generated.parent_run import ParentRunFacet

    from spark_emitter.buffer import DiskBuffer

__all__ = ["DeliveryStats", "EventSender", "client_event", "open_client"]

log = logging.getLogger(__name__)

_STOP = object()
# Wakes the sender thread to try the buffered events now rather than at the next interval.
_RETRY_NOW = object()
_Dataset = TypeVar("_Dataset", "InputDataset", "OutputDataset")


def open_client(transport: dict[str, Any] | None) -> OpenLineageClient | None:
    """The client that sends the events: through ``transport`` (the client's transport
    configuration, from Spark conf or arguments), else through what the client finds
    itself (``openlineage.yml``, ``OPENLINEAGE__TRANSPORT__*``, ``OPENLINEAGE_URL``).
    None when nothing is configured: the client would print every event to the console."""
    try:
        from openlineage.client import OpenLineageClient
        from openlineage.client.transport import get_default_factory
    except ImportError as error:
        raise ImportError(
            "spark_emitter sends events with openlineage-python: pip install openlineage-python"
        ) from error
    if transport is None:
        with _quiet_console_fallback():
            client = OpenLineageClient()
        chosen = (client.config.transport or {}).get("type")
        if client.transport.kind == "console" and chosen != "console":
            return None
        return client
    try:
        built = get_default_factory().create(dict(transport))
    except ImportError:
        raise
    except Exception as error:  # the client's own words: a missing or bad value
        raise ConfigurationError(f"spark.openlineage.transport: {error}") from error
    return OpenLineageClient(transport=built)


class _DropConsoleFallback(logging.Filter):
    """Drops the client's "will print events to console" lines: we do not use the client
    it builds then, and say ourselves that nothing is emitted."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return "print events to console" not in message and "`console` transport" not in message


@contextlib.contextmanager
def _quiet_console_fallback() -> Iterator[None]:
    client_log = logging.getLogger("openlineage.client.client")
    drop = _DropConsoleFallback()
    client_log.addFilter(drop)
    try:
        yield
    finally:
        client_log.removeFilter(drop)


def client_event(event: dict[str, Any]) -> RunEvent:
    """``event`` in the client's ``RunEvent`` envelope, its facets the same dicts. What
    the event leaves out stays out (None, which the client does not write), rather than
    the client's defaults (``[]``, ``{}``)."""
    from openlineage.client.event_v2 import (
        InputDataset,
        Job,
        OutputDataset,
        Run,
        RunEvent,
        RunState,
    )

    # A copy: the client adds its own run facets (tags) to the dict it is given, and our
    # event must stay plain JSON (the disk buffer writes it after a failed send).
    run_facets = event["run"].get("facets")
    if run_facets is not None:
        run_facets = dict(run_facets)
        if "parent" in run_facets:
            run_facets["parent"] = _parent_facet(run_facets["parent"])
    job = event["job"]
    return RunEvent(
        eventType=RunState(event["eventType"]),
        eventTime=event["eventTime"],
        run=Run(runId=event["run"]["runId"], facets=run_facets),
        job=Job(namespace=job["namespace"], name=job["name"], facets=job.get("facets")),
        inputs=_datasets(InputDataset, event.get("inputs"), "inputFacets"),
        outputs=_datasets(OutputDataset, event.get("outputs"), "outputFacets"),
        producer=event["producer"],
    )


def _datasets(
    kind: type[_Dataset], datasets: list[dict[str, Any]] | None, own: str
) -> list[_Dataset] | None:
    """The client's input or output datasets; ``own`` names their own facets' key."""
    if datasets is None:
        return None
    return [
        kind(
            namespace=dataset["namespace"],
            name=dataset["name"],
            facets=dataset.get("facets"),
            **{own: dataset.get(own)},
        )
        for dataset in datasets
    ]


def _parent_facet(facet: dict[str, Any]) -> ParentRunFacet:
    from openlineage.client.facet_v2 import parent_run

    root = None
    if "root" in facet:
        root = parent_run.Root(
            run=parent_run.RootRun(runId=facet["root"]["run"]["runId"], facets=None),
            job=parent_run.RootJob(
                namespace=facet["root"]["job"]["namespace"],
                name=facet["root"]["job"]["name"],
                facets=None,
            ),
        )
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=facet["run"]["runId"], facets=None),
        job=parent_run.Job(
            namespace=facet["job"]["namespace"], name=facet["job"]["name"], facets=None
        ),
        root=root,
        producer=facet["_producer"],
    )


def _retriable(error: Exception) -> bool:
    """Whether sending ``error``'s event again later can succeed: not when the endpoint
    answered and refused it (a 4xx: the same event would be refused again, and buffering
    it would hold every later event behind it)."""
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    return not (isinstance(status, int) and 400 <= status < 500)


@dataclass
class DeliveryStats:
    """Counters a caller (or a test) can read: what happened to the submitted events.
    ``buffered``: kept on disk because the transport failed (sent later, then also
    counted in ``sent``); ``failed``: not delivered and not buffered (no buffer)."""

    sent: int = 0
    failed: int = 0
    dropped: int = 0
    buffered: int = 0


class EventSender:
    """A bounded queue drained by one daemon thread that emits each event through the
    client; with a :class:`~spark_emitter.buffer.DiskBuffer`, what the client cannot
    deliver waits on disk (and every later event behind it) and is retried every
    ``retry_interval`` seconds."""

    def __init__(
        self,
        client: OpenLineageClient,
        *,
        queue_size: int = 10_000,
        buffer: DiskBuffer | None = None,
        retry_interval: float = 5.0,
    ) -> None:
        self._client = client
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._closed = False
        self._buffer = buffer
        self._retry_interval = retry_interval
        self._next_retry = 0.0
        # Held while the buffer is touched; ``_handed_over`` once close() took over what
        # the thread had not finished (the thread then leaves the buffer alone).
        self._lock = threading.Lock()
        self._handed_over = False
        self._in_flight: dict[str, Any] | None = None
        # When close() began draining (None before), and when the last send that failed
        # and left its event on disk began: a send begun during the drain that fails ends it.
        self._draining_since: float | None = None
        self._failed_send_began = 0.0
        self.stats = DeliveryStats()
        self._thread = threading.Thread(target=self._run, name="openlineage-sender", daemon=True)
        self._thread.start()

    @property
    def transport(self) -> str:
        """Which transport the events go through, for logs and tests."""
        return str(self._client.transport.kind)

    def submit(self, event: dict[str, Any]) -> bool:
        """Queue ``event`` for sending; never blocks. False if it was dropped."""
        if self._closed:
            self.stats.dropped += 1
            return False
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.stats.dropped += 1
            log.warning(
                "openlineage: send queue full, event dropped (%d so far)", self.stats.dropped
            )
            return False
        return True

    def flush(self, timeout: float) -> bool:
        """Wait until every queued event has been sent, buffered or given up (and, with
        a buffer, the buffer is empty); False on timeout."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks or self._buffer_pending():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def close(self, timeout: float) -> bool:
        """Send what is queued and, with a buffer, what waits on disk within ``timeout``
        seconds, then stop and close the transport (a kafka producer flushes there);
        False if some was left. With a buffer, what is left stays on disk, and the one
        line said at exit counts it there.

        Events on disk are tried at once, not at the next retry interval: the proxy may
        be back, and the disk may not outlive the driver. A send that was under way when
        the stop began and fails is tried again at once (the proxy may have come back
        since it began); waiting ends at the first send begun during the stop that fails
        (the proxy is still down), so a stop costs one or two of the transport's retry
        rounds when the proxy is down, never more than ``timeout``."""
        if self._closed:
            return True
        deadline = time.monotonic() + timeout
        on_disk = self._waiting_on_disk()
        drained = self._drain(deadline)
        self._closed = True
        if self._buffer is not None and not drained:
            self._hand_over_to_disk()
        # A full queue means the thread is busy until the process ends: a daemon, it dies then.
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(_STOP)
        if not drained and self._buffer is None:
            log.warning(
                "openlineage: %d event(s) not sent within %.1fs at exit",
                self._queue.qsize(),
                timeout,
            )
            return False
        if self._buffer is not None and drained:
            with self._lock:
                self._handed_over = True
                self._buffer.close()
            if on_disk:
                log.info(
                    "openlineage: the %d event(s) waiting on disk at stop were delivered, "
                    "none left in %s",
                    on_disk,
                    self._buffer.directory,
                )
        try:
            closed = bool(self._client.close(max(0.1, deadline - time.monotonic())))
        except Exception as error:
            log.warning("openlineage: closing the %s transport failed: %s", self.transport, error)
            return False
        return closed and drained

    def _drain(self, deadline: float) -> bool:
        """Wait until the queue and the buffer are empty; False at ``deadline`` or as soon
        as a send begun during the drain fails (what is left would only wait for the
        deadline)."""
        with self._lock:  # with _failed(): a failure now cannot set a retry interval after this
            began = self._draining_since = time.monotonic()
            self._next_retry = 0.0
        if self._buffer_pending():
            with contextlib.suppress(queue.Full):  # full: the thread is busy, and retries next
                self._queue.put_nowait(_RETRY_NOW)
        while self._queue.unfinished_tasks or self._buffer_pending():
            if time.monotonic() >= deadline or self._failed_send_began >= began:
                return False
            time.sleep(0.01)
        return True

    def _failed(self, began: float) -> None:
        """A send begun at ``began`` failed and its event waits on disk: retry after the
        interval — at once when it began before close() started draining and failed
        during it (the proxy may have come back in between). One begun during the drain
        ends it: the proxy did not answer, and no further send may start before close()
        hands the rest to disk (it could reach a proxy back a moment later and arrive
        twice)."""
        with self._lock:
            self._failed_send_began = began
            draining = self._draining_since
            now = draining is not None and began < draining
            self._next_retry = time.monotonic() + (0.0 if now else self._retry_interval)

    def _waiting_on_disk(self) -> int:
        with self._lock:
            if self._buffer is None or self._handed_over:
                return 0
            return sum(self._buffer.waiting().values())

    def _buffer_pending(self) -> bool:
        with self._lock:
            return self._buffer is not None and not self._handed_over and self._buffer.pending()

    def _hand_over_to_disk(self) -> None:
        """At close: the event in flight and everything queued, in order, onto disk."""
        assert self._buffer is not None
        with self._lock:
            self._handed_over = True
            left = [] if self._in_flight is None else [self._in_flight]
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                self._queue.task_done()
                if item is not _STOP and item is not _RETRY_NOW:  # markers are not events
                    left.append(item)
            for event in left:
                if self._buffer.append(event):
                    self.stats.buffered += 1
                else:
                    self.stats.dropped += 1
            waiting = self._buffer.waiting()
            self._buffer.close()
        directory = self._buffer.directory
        log.warning(
            "openlineage: %d event(s) not delivered at stop, kept on disk in %s (%s): the "
            "next application with this buffer directory sends them, or "
            "`python -m spark_emitter.buffer send %s`",
            sum(waiting.values()),
            directory,
            ", ".join(f"{path.name}: {count}" for path, count in waiting.items()) or "none",
            directory,
        )

    def _run(self) -> None:
        while True:
            wait = None
            if self._buffer_pending():
                wait = max(0.0, self._next_retry - time.monotonic())
            try:
                event = self._queue.get(timeout=wait)
            except queue.Empty:
                event = None
            if event is _STOP:
                self._queue.task_done()
                return
            if event is _RETRY_NOW:
                self._queue.task_done()
            elif event is not None:
                self._in_flight = event
                try:
                    self._deliver(event)
                except Exception:  # the sender thread must survive anything
                    self.stats.failed += 1
                    log.warning("openlineage: event lost", exc_info=True)
                finally:
                    self._in_flight = None
                    self._queue.task_done()
            if self._buffer_pending() and time.monotonic() >= self._next_retry:
                self._send_buffered()

    def _deliver(self, event: dict[str, Any]) -> None:
        if self._buffer_pending():
            self._to_buffer(event)
            return
        began = time.monotonic()
        error = self._emit(event)
        if error is None:
            self.stats.sent += 1
        elif self._buffer is not None and _retriable(error):
            self._to_buffer(event)
            self._failed(began)
        else:
            self.stats.failed += 1

    def _to_buffer(self, event: dict[str, Any]) -> None:
        with self._lock:
            if self._handed_over or self._buffer is None:
                return  # close() wrote it to disk already
            if self._buffer.append(event):
                self.stats.buffered += 1
            else:
                self.stats.dropped += 1
            # On disk now: close() must not write it a second time as the event in flight.
            self._in_flight = None

    def _send_buffered(self) -> None:
        """Send buffered events oldest first until one fails or none is left."""
        while True:
            with self._lock:
                if self._handed_over or self._buffer is None:
                    return
                event = self._buffer.oldest()
            if event is None:
                return
            began = time.monotonic()
            error = self._emit(event)
            if error is not None and _retriable(error):
                self._failed(began)
                return
            with self._lock:
                if self._handed_over:
                    return  # an event sent twice, never lost (see spark_emitter.buffer)
                self._buffer.delivered()  # sent, or refused for good: either way not again
                if error is None:
                    self.stats.sent += 1
                else:
                    self.stats.failed += 1

    def _emit(self, event: dict[str, Any]) -> Exception | None:
        """Hand ``event`` to the client; the error when it was not delivered."""
        try:
            self._client.emit(client_event(event))
        except Exception as error:  # the sender thread must survive anything
            log.warning(
                "openlineage: event not delivered through the %s transport: %s",
                self.transport,
                str(error).strip().split("\n", 1)[0],
            )
            log.debug("openlineage: event not delivered", exc_info=True)
            return error
        return None
