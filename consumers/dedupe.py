"""A bounded cache of delivered events, so redeliveries do not store duplicates.

At-least-once means a crash or rebalance can deliver an event again; Marquez stores a
duplicate twice. An event is identified by run id + event type + event time + job (or
dataset). The cache is an LRU of ``max_entries`` identities. With a journal file, each
identity is appended once the target accepted the event (before its offset can be
committed) and the file is reloaded at start, so a restarted process skips what it had
already delivered. The journal survives the process, not the disk, and covers only the
events this process delivered: after a rebalance to *another* process, that process
does not know them.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import orjson

from proxy.support.bounded_cache import BoundedCache

__all__ = ["DedupeCache", "event_identity"]


def event_identity(event: dict[str, Any]) -> str:
    """run id + event type + event time + job (or dataset) namespace/name, as one string."""
    run = event.get("run")
    job = event.get("job") or event.get("dataset") or {}
    parts = [
        run.get("runId") if isinstance(run, dict) else None,
        event.get("eventType"),
        event.get("eventTime"),
        job.get("namespace") if isinstance(job, dict) else None,
        job.get("name") if isinstance(job, dict) else None,
    ]
    return orjson.dumps(parts).decode()


class DedupeCache:
    def __init__(self, max_entries: int, journal: Path | None = None) -> None:
        self.max_entries = max_entries
        self.journal = journal
        self._seen: BoundedCache[str, None] = BoundedCache(max_entries)
        self._fd: int | None = None
        self._journal_lines = 0
        self._lock = asyncio.Lock()

    def __len__(self) -> int:
        return len(self._seen)

    async def open(self) -> None:
        """Load the journal (if any) and keep it open for appending."""
        if self.journal is not None:
            await asyncio.to_thread(self._load_and_compact)

    def seen(self, identity: str) -> bool:
        return self._seen.touch(identity)

    async def add(self, identity: str) -> None:
        self._remember(identity)
        if self._fd is None:
            return
        async with self._lock:
            await asyncio.to_thread(os.write, self._fd, identity.encode() + b"\n")
            self._journal_lines += 1
            if self._journal_lines > 2 * self.max_entries:
                await asyncio.to_thread(self._compact)

    async def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _remember(self, identity: str) -> None:
        self._seen.put(identity, None)

    def _load_and_compact(self) -> None:
        assert self.journal is not None
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        if self.journal.exists():
            # The piece after the last newline is a line cut by a crash mid-write: dropped.
            for line in self.journal.read_bytes().split(b"\n")[:-1]:
                if line:
                    self._remember(line.decode("utf-8", "replace"))
        self._compact()

    def _compact(self) -> None:
        """Rewrite the journal with the cache's entries only (atomic rename)."""
        assert self.journal is not None
        if self._fd is not None:
            os.close(self._fd)
        tmp = self.journal.with_suffix(self.journal.suffix + ".tmp")
        tmp.write_bytes(b"".join(k.encode() + b"\n" for k in self._seen))
        os.replace(tmp, self.journal)
        self._fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._journal_lines = len(self._seen)
