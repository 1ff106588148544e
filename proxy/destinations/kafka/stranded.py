"""The record a proxy pod leaves on its volume when its preStop drain gave up, and the
gauge the next process on that volume reports it with.

When Kubernetes removes a proxy pod (scale-in, node drain) while Kafka does not take its
spool, the preStop hook (:mod:`proxy.server.prestop`) gives up after its timeout and the pod
goes; the acknowledged events stay on its claim. The hook's failure is a
``FailedPreStopHook`` event that expires in about an hour, and the pod's spool metrics go
with the pod. So the hook also writes ``stranded.json`` at the top of the spool
directory — which pod, when, how many events in which directories — a record that stays
with the events: ``lineage-proxy spool list`` and a pod mounting the claim see it, and a
proxy that starts on the volume reports it (``lineage_proxy_spool_stranded_events``,
alert LineageProxySpoolStranded; a WARNING at start) until the spool holds no segment
any more — then the record is removed, by the proxy or by ``lineage-proxy spool drain``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from proxy.destinations.kafka.spool import holds_segments
from proxy.destinations.kafka.spool_dirs import spool_contents

__all__ = [
    "RECORD",
    "Stranded",
    "StrandedSpool",
    "clear_if_drained",
    "read_record",
    "spooled_under",
    "write_record",
]

log = logging.getLogger(__name__)

# The record's name, directly under kafka.spool.directory.
RECORD = "stranded.json"


@dataclass(frozen=True)
class Stranded:
    """What a preStop drain left behind."""

    pod: str
    # Unix time the drain gave up.
    at: float
    events: int
    bytes: int
    directories: list[str]


def spooled_under(root: Path) -> list[Path]:
    """Directories under ``root`` (itself included) that still hold spool segments: one
    per cluster, per worker, and any left by an earlier run."""
    if not root.is_dir():
        return []
    candidates = [root, *(path for path in root.rglob("*") if path.is_dir())]
    return sorted(path for path in candidates if holds_segments(path))


def write_record(
    root: Path, left: Iterable[Path], *, pod: str | None = None, now: float | None = None
) -> Stranded:
    """Write the record of the events left in ``left`` (atomically: a reader never sees
    half of it) and return it."""
    directories = list(left)
    contents = [spool_contents(directory) for directory in directories]
    stranded = Stranded(
        pod=pod or os.environ.get("HOSTNAME") or os.uname().nodename,
        at=time.time() if now is None else now,
        events=sum(c.events for c in contents),
        bytes=sum(c.bytes for c in contents),
        directories=[str(d) for d in directories],
    )
    temporary = root / f".{RECORD}.tmp"
    with temporary.open("w") as file:
        json.dump(asdict(stranded), file)
        file.flush()
        os.fsync(file.fileno())
    temporary.replace(root / RECORD)
    return stranded


def read_record(root: Path) -> Stranded | None:
    """The record under ``root``, or None (none, or unreadable: a half-written record
    cannot exist, so unreadable means someone edited it)."""
    try:
        return Stranded(**json.loads((root / RECORD).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def clear_if_drained(root: Path) -> Stranded | None:
    """Remove the record once ``root`` holds no spool segment (Kafka has every event it
    named); return the record while events are still left, else None."""
    stranded = read_record(root)
    if stranded is None:
        return None
    if spooled_under(root):
        return stranded
    (root / RECORD).unlink(missing_ok=True)
    log.info(
        "the %d events pod %s left in spool %s when its preStop drain gave up are all in Kafka",
        stranded.events,
        stranded.pod,
        root,
    )
    return None


class StrandedSpool(Collector):
    """``lineage_proxy_spool_stranded_events`` and ``…_stranded_timestamp_seconds`` from
    the record under the spool root, while the spool still holds events. :meth:`watch`
    reads the disk (off the event loop: a stalled disk must not stall the proxy), the
    scrape only what it found."""

    def __init__(self) -> None:
        self.current: Stranded | None = None

    async def watch(self, root: Path, interval: float = 10.0) -> None:
        """Say at start what a record under ``root`` names, then re-read it every
        ``interval`` seconds until the spool is drained and the record removed."""
        self.current = await asyncio.to_thread(clear_if_drained, root)
        if self.current is not None:
            log.warning(
                "spool %s holds events pod %s could not forward when its preStop drain gave"
                " up at %s (%d events then; %s): they are forwarded as Kafka takes them",
                root,
                self.current.pod,
                time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.current.at)),
                self.current.events,
                root / RECORD,
            )
        while self.current is not None:
            await asyncio.sleep(interval)
            self.current = await asyncio.to_thread(clear_if_drained, root)

    def collect(self) -> Iterator[Metric]:
        events = GaugeMetricFamily(
            "lineage_proxy_spool_stranded_events",
            "Events a pod's preStop drain could not forward before the pod went, found on "
            "this volume and not all in Kafka yet (0: none).",
        )
        since = GaugeMetricFamily(
            "lineage_proxy_spool_stranded_timestamp_seconds",
            "Unix time that preStop drain gave up (0: nothing stranded).",
        )
        stranded = self.current
        events.add_metric([], 0 if stranded is None else stranded.events)
        since.add_metric([], 0 if stranded is None else stranded.at)
        yield events
        yield since
