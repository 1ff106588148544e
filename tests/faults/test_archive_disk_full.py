"""The archive's disk fills up under load from 32 clients, then is freed again.

A real 2 MiB tmpfs (mounted as root) holds the archive; a filler file takes the rest of
it. While full, every request is answered within its deadline (503 + Retry-After),
``/readyz`` says 503 and no file holds a torn line; once the filler is deleted the same
proxy answers 2xx again, and every acknowledged event is in the archive as it was sent.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.support.figures import report
from tests.support.load import compare, post_events
from tests.support.sample_events import rich_run_event
from tests.support.small_disk import fill, small_tmpfs
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RULES = """\
version: 1
destinations:
  archive: {kind: archive, directory: events, write_timeout_seconds: 4}
rules: []
default: {to: [archive]}
"""
# A request is answered within the archive's write timeout; this leaves room for a
# slow, shared machine.
DEADLINE_SECONDS = 10.0


def archived_events(directory: Path) -> list[dict[str, Any]]:
    """Every line of every archive file (finished or not); asserts none is torn."""
    events = []
    for path in directory.rglob("*.jsonl*"):
        data = path.read_bytes()
        assert not data or data.endswith(b"\n"), f"torn last line in {path}"
        events += [orjson.loads(line) for line in data.splitlines()]
    return events


async def readyz(session: aiohttp.ClientSession, url: str) -> int:
    async with session.get(f"{url}/readyz") as response:
        return response.status


async def test_full_archive_disk_answers_503_fast_then_recovers_without_restart(
    start_proxy, tmp_path: Path
):
    with small_tmpfs("2m") as disk:
        if disk is None:
            pytest.skip(
                "mounting a tmpfs is not permitted here (needs root); the writer-level "
                "test covers a full disk with RLIMIT_FSIZE instead"
            )
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES)
        sent: dict[str, dict[str, Any]] = {}

        def events(count: int) -> list[dict[str, Any]]:
            batch = [rich_run_event() for _ in range(count)]
            sent.update((e["run"]["runId"], e) for e in batch)
            return batch

        routing = {"rules": rules, "archive_root": disk, "reload_interval_seconds": 0}
        async with start_proxy(routing=routing) as url, aiohttp.ClientSession() as session:
            before = await post_events(url, events(200))
            assert before.statuses == {200: 200}

            filler = fill(disk)
            during = await post_events(url, events(300), pause_seconds=0.01)
            refused = during.statuses[503]
            assert refused > 0, during.statuses
            assert set(during.statuses) <= {200, 503}, during.statuses
            async with session.post(
                f"{url}/api/v1/lineage", data=orjson.dumps(rich_run_event())
            ) as response:
                assert response.status == 503
                assert int(response.headers["Retry-After"]) >= 1
            assert await readyz(session, url) == 503
            archived_events(disk)  # no torn line while full

            filler.unlink()
            freed_at = time.monotonic()
            after = await post_events(url, events(300), pause_seconds=0.01)
            recovered = after.first_success_after(freed_at)
            assert after.statuses == {200: 300}, after.statuses
            assert await readyz(session, url) == 200
        stored = archived_events(disk)  # the proxy is stopped: every file is finished

    acknowledged = before.acknowledged + during.acknowledged + after.acknowledged
    found = Counter(event["run"]["runId"] for event in stored)
    for event in stored:
        assert event == sent[event["run"]["runId"]]  # exactly as acknowledged
    figures = report(
        "archive_disk_full_32_clients",
        sent=len(sent),
        refused_while_full=refused,
        **compare(acknowledged, found),
        seconds_to_recover=round(recovered - freed_at, 3) if recovered else None,
        slowest_answer=round(max(r.slowest_seconds for r in (before, during, after)), 3),
    )
    assert figures["lost"] == 0 and figures["duplicates"] == 0
    assert figures["slowest_answer"] < DEADLINE_SECONDS
    assert recovered is not None


async def test_readyz_follows_the_archive_disk(start_proxy, tmp_path: Path):
    """Without traffic too: full → 503, freed → 200 (the archive probes the disk)."""
    with small_tmpfs("1m") as disk:
        if disk is None:
            pytest.skip("mounting a tmpfs is not permitted here (needs root)")
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES)
        routing = {"rules": rules, "archive_root": disk, "reload_interval_seconds": 0}
        async with start_proxy(routing=routing) as url, aiohttp.ClientSession() as session:
            assert await readyz(session, url) == 200
            filler = fill(disk)
            async with session.post(
                f"{url}/api/v1/lineage", data=orjson.dumps(rich_run_event())
            ) as response:
                assert response.status == 503
            assert await readyz(session, url) == 503
            filler.unlink()

            async def ready_again() -> bool:
                return await readyz(session, url) == 200

            await wait_for(ready_again, what="/readyz 200 once the disk is freed")
