"""Where spools live on disk, which cluster each one is for, and what each one holds.

A proxy instance spools for the Kafka cluster of its config (``kafka.bootstrap_servers``)
in ``<root>/default``, whatever that address says: correcting a mistyped address or
adding a broker to the list must not strand what was acknowledged while it was wrong.
A destination that names a cluster of its own (``bootstrap_servers`` in a rules file)
spools in a directory named after that address. Each spool directory records the
address it was last written for in ``cluster.json``, so that a spool meant for a cluster
this config no longer writes to can be named (with its count and how to forward it)
instead of being sent to the wrong cluster.

Before this layout, every spool directory was named after its address and had no
``cluster.json``; such a directory left by an older version is forwarded to the
cluster of the same address if this config has one, else to the configured cluster.

All functions here block (file system): call them from a thread.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson

from proxy.destinations.kafka.spool import (
    DEAD_LETTER_FILE,
    decode_records,
    holds_segments,
)

__all__ = [
    "DEFAULT_CLUSTER_DIR",
    "SpoolContents",
    "address_dir_name",
    "cluster_for",
    "dead_letter_files",
    "record_cluster",
    "recorded_cluster",
    "spool_contents",
    "spool_directories",
    "spool_directory",
]

# The configured cluster's spool, under each spool root (one per proxy process).
DEFAULT_CLUSTER_DIR = "default"
_CLUSTER_FILE = "cluster.json"
_WORKER_DIR = re.compile(r"worker-\d+")


def address_dir_name(bootstrap_servers: str) -> str:
    """A directory name for a cluster named by its address (``127.0.0.1:9`` → ``127.0.0.1_9``)."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", bootstrap_servers)[:200]


def spool_directory(root: Path, bootstrap_servers: str, configured_servers: str) -> Path:
    """The spool of the cluster at ``bootstrap_servers`` under ``root``: ``default`` for
    the configured cluster (``configured_servers``), one named after the address for a
    cluster a destination names itself."""
    if bootstrap_servers == configured_servers:
        return root / DEFAULT_CLUSTER_DIR
    return root / address_dir_name(bootstrap_servers)


def record_cluster(directory: Path, bootstrap_servers: str) -> None:
    """Note in ``directory`` which cluster its events are for (read by :func:`cluster_for`
    and ``lineage-proxy spool list``)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / _CLUSTER_FILE
    data = orjson.dumps({"bootstrap_servers": bootstrap_servers})
    if not path.is_file() or path.read_bytes() != data:
        temporary = path.with_suffix(".tmp")
        temporary.write_bytes(data)
        temporary.replace(path)


def recorded_cluster(directory: Path) -> str | None:
    """The address ``directory`` was last written for, or None (an older version's spool,
    or a file that cannot be read)."""
    try:
        servers = orjson.loads((directory / _CLUSTER_FILE).read_bytes())["bootstrap_servers"]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return servers if isinstance(servers, str) else None


def cluster_for(directory: Path, configured_servers: str, clusters: Iterable[str]) -> str | None:
    """The cluster a spool left on disk is to be forwarded to, or None when it was written
    for a cluster this config does not write to (``clusters``: the addresses it does).

    ``default`` is the instance's own: the configured cluster, whatever address it had
    then. A directory of an older version (no ``cluster.json``) goes to the cluster its
    name spells if there is one, else to the configured cluster: it was named after an
    address that may well have been a typo."""
    known = {configured_servers, *clusters}
    if directory.name == DEFAULT_CLUSTER_DIR:
        return configured_servers
    recorded = recorded_cluster(directory)
    if recorded is not None:
        return recorded if recorded in known else None
    by_name = {address_dir_name(servers): servers for servers in known}
    return by_name.get(directory.name, configured_servers)


def dead_letter_files(roots: Iterable[Path]) -> list[Path]:
    """Every spool's dead-letter file directly under ``roots`` (a spool may hold dead
    letters and no segment at all)."""
    return [
        path
        for root in roots
        if root.is_dir()
        for path in sorted(root.glob(f"*/{DEAD_LETTER_FILE}"))
        if not _WORKER_DIR.fullmatch(path.parent.name)
    ]


def spool_directories(roots: Iterable[Path]) -> list[Path]:
    """Every spool directory holding segments directly under ``roots`` (worker roots
    ``worker-N`` are roots of their own, not spools)."""
    found = []
    for root in roots:
        if not root.is_dir():
            continue
        for path in sorted(root.iterdir()):
            if path.is_dir() and not _WORKER_DIR.fullmatch(path.name) and holds_segments(path):
                found.append(path)
    return found


@dataclass(frozen=True)
class SpoolContents:
    """What a spool directory holds, read without taking it over."""

    directory: Path
    events: int
    bytes: int
    # Unix time the oldest record was spooled, None when it holds no whole record.
    oldest: float | None
    cluster: str | None


def spool_contents(directory: Path) -> SpoolContents:
    """Count the whole records of every segment in ``directory`` (read-only: a live
    proxy may be appending; what it appends after this read is not counted)."""
    events = size = 0
    oldest: float | None = None
    for path in sorted(directory.glob("segment-*.spool")):
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # drained and deleted meanwhile
            continue
        records, _ = decode_records(data, 0)
        events += len(records)
        size += len(data)
        if records and oldest is None:
            oldest = records[0].spooled_at
    return SpoolContents(directory, events, size, oldest, recorded_cluster(directory))
