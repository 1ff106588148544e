"""A 2xx is a promise the proxy keeps even if it dies the next instant: ``lineage-proxy
serve`` is SIGKILLed while 32 clients post, and every event it acknowledged must be in
Kafka and in the archive (the default rules send every event to both)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from aiohttp import ClientError, ClientSession

from tests.support.figures import report
from tests.support.load import archive_run_ids, compare, kafka_run_ids, post_events
from tests.support.processes import serve_process, wait_until_ready
from tests.support.sample_events import rich_run_event
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SENT = 3000
KILL_AFTER_ACCEPTED = 300


async def _accepted(url: str) -> float:
    """Events the proxy has answered 2xx for so far, from its own metrics."""
    try:
        async with ClientSession() as session, session.get(f"{url}/metrics") as resp:
            text = await resp.text()
    except ClientError:
        return 0.0
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("lineage_proxy_events_accepted_total{")
    )


async def test_proxy_sigkilled_under_load_from_32_clients_loses_no_acknowledged_event(
    broker, topic, tmp_path: Path
):
    process, url = serve_process(
        broker.bootstrap_servers,
        kafka__topic=topic,
        routing__archive_root=str(tmp_path),
        consumers__archive__target__directory=str(tmp_path / "consumed"),
    )
    try:
        await asyncio.to_thread(wait_until_ready, url, process)
        events = (rich_run_event() for _ in range(SENT))
        load = asyncio.create_task(post_events(url, events, concurrency=32))

        async def enough_accepted() -> bool:
            if await _accepted(url) >= KILL_AFTER_ACCEPTED:
                return True
            assert not load.done(), "the load ended before the kill: raise SENT"
            return False

        await wait_for(enough_accepted, 60, f"{KILL_AFTER_ACCEPTED} events accepted", alive=process)
        process.send_signal(signal.SIGKILL)
        result = await load
        assert await asyncio.to_thread(process.wait, 30) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
    in_kafka = kafka_run_ids(broker.bootstrap_servers, topic)
    in_archive = archive_run_ids(tmp_path / "events")
    kafka = compare(result.acknowledged, in_kafka)
    archive = compare(result.acknowledged, in_archive)
    report(
        "proxy_sigkill_under_32_clients",
        sent=result.sent,
        answered_before_kill=sum(n for s, n in result.statuses.items() if isinstance(s, int)),
        failed=sum(n for s, n in result.statuses.items() if not isinstance(s, int)),
        acknowledged=kafka["acknowledged"],
        found=kafka["found"],
        lost=kafka["lost"],
        duplicates=kafka["duplicates"],
        archive_found=archive["found"],
        archive_lost=archive["lost"],
        archive_duplicates=archive["duplicates"],
    )
    # The kill landed mid-load: some requests got answers, the rest none.
    assert kafka["acknowledged"] >= KILL_AFTER_ACCEPTED
    assert result.acknowledged and len(result.acknowledged) < SENT
    assert kafka["lost"] == 0, "an acknowledged event is missing from Kafka"
    assert archive["lost"] == 0, "an acknowledged event is missing from the archive"
