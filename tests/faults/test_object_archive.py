"""The archive in object storage, against a real S3-compatible server (S3Proxy).

A consumer daemon reads Kafka and writes to a bucket (kind ``object_archive``). Under
load every event lands in a finished object of the archive layout; while the store is
stopped nothing is committed past what is stored and nothing is dead-lettered, and the
consumer resumes by itself. Figures: sent, found in the bucket,
duplicates, dead-lettered, seconds to recover, lost (0).
"""

from __future__ import annotations

import asyncio
import gzip
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from tests.faults.figures import report
from tests.support.consumers import (
    committed_offsets,
    consumer_config,
    create_topic,
    dead_letter_count,
    encoded,
    produce,
    running,
    seq,
    sequenced_run_events,
)
from tests.support.s3_server import BUCKET, S3Server, object_archive_target, s3_credentials
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("s3")]

_KEY = re.compile(
    r"^(?P<prefix>[^/]+(?:/[^/]+)*)/dt=\d{4}-\d{2}-\d{2}/namespace=[^/]+/events-\d{8}T\d{6}Z-"
    r"[^/]+\.jsonl(\.gz)?$"
)

# S3Proxy's filesystem store writes an object to ``<key>-<uuid>`` and renames it when the
# PUT completes; SIGKILLed mid-PUT (the outage tests kill the server), it leaves that file
# behind and lists it. A server artifact of a PUT that never completed — not an object our
# writer committed (real S3 never shows an incomplete PUT) — so it is not read as one.
_SERVER_TEMPORARY = re.compile(
    r"\.jsonl(\.gz)?-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
)


@pytest.fixture(scope="module")
def s3(tmp_path_factory) -> Iterator[S3Server]:
    """One S3Proxy for the module; a test that stops it starts it again."""
    server = S3Server(tmp_path_factory.mktemp("s3")).start()
    server.client().create_bucket(Bucket=BUCKET)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def credentials(monkeypatch) -> None:
    for name, value in s3_credentials().items():
        monkeypatch.setenv(name, value)


def target(s3: S3Server, prefix: str, **fields: Any) -> dict[str, Any]:
    return object_archive_target(s3, prefix, **fields)


def stored_events(s3: S3Server, prefix: str) -> list[dict[str, Any]]:
    """Every event in every object under ``prefix`` (all keys in the archive layout)."""
    client = s3.client()
    events = []
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=f"{prefix}/"
    ):
        for item in page.get("Contents", []):
            if _SERVER_TEMPORARY.search(item["Key"]):
                continue
            assert _KEY.match(item["Key"]), item["Key"]
            body = client.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read()
            if item["Key"].endswith(".gz"):
                body = gzip.decompress(body)
            assert body.endswith(b"\n"), f"torn object {item['Key']}"
            events += [orjson.loads(line) for line in body.splitlines()]
    return events


def open_uploads(s3: S3Server, prefix: str) -> int:
    answer = s3.client().list_multipart_uploads(Bucket=BUCKET, Prefix=f"{prefix}/")
    return len(answer.get("Uploads", []))


def _figures(events: list, found: Counter[Any], bootstrap: str, topic: str) -> dict[str, Any]:
    sent = {seq(event) for _, event in events}
    return {
        "sent": len(sent),
        "found_in_bucket": len(set(found) & sent),
        "lost": len(sent - set(found)),
        "duplicates": sum(n - 1 for n in found.values()),
        "dead_lettered": dead_letter_count(bootstrap, topic),
    }


@pytest.mark.parametrize("compressed", [False, True], ids=["jsonl", "gzip"])
async def test_consumer_archives_every_event_to_the_bucket_under_load(
    broker, topic, s3, credentials, compressed
):
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 3)
    events = sequenced_run_events(runs=40, per_run=50)
    prefix = f"load-{topic}"
    config = consumer_config(target(s3, prefix, gzip=compressed), topic)
    async with running(bootstrap, config):
        await asyncio.to_thread(produce, bootstrap, topic, encoded(events))

        def all_stored() -> bool:
            return len(stored_events(s3, prefix)) >= len(events)

        await wait_for(lambda: asyncio.to_thread(all_stored), within=120, what="every event")
    found = Counter(seq(e) for e in stored_events(s3, prefix))
    figures = report(
        f"object archive: consumer under load ({'gzip' if compressed else 'jsonl'})",
        **_figures(events, found, bootstrap, topic),
    )
    assert figures["lost"] == 0 and figures["dead_lettered"] == 0
    assert figures["duplicates"] == 0  # nothing failed, nothing was sent twice
    assert open_uploads(s3, prefix) == 0


async def _outage(broker, topic, s3: S3Server, seconds: float) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 1)
    events = sequenced_run_events(runs=10, per_run=40)
    prefix = f"outage-{topic}"
    config = consumer_config(target(s3, prefix), topic)
    offset_of = {seq(event): i for i, (_, event) in enumerate(events)}
    half = len(events) // 2
    async with running(bootstrap, config, name="outage"):
        await asyncio.to_thread(produce, bootstrap, topic, encoded(events[:half]))
        await wait_for(
            lambda: asyncio.to_thread(lambda: len(stored_events(s3, prefix)) >= half),
            within=120,
            what="the first half stored",
        )
        s3.stop()
        down_at = asyncio.get_running_loop().time()
        await asyncio.to_thread(produce, bootstrap, topic, encoded(events[half:]))
        # The store is down: let commits run, then check they cover only stored events.
        while asyncio.get_running_loop().time() - down_at < seconds:
            [committed] = committed_offsets(bootstrap, config.group_id or "", topic, 1)
            assert committed <= half, f"committed {committed} past the {half} stored"
            await asyncio.sleep(0.5)
        await asyncio.to_thread(s3.start)
        back_at = asyncio.get_running_loop().time()
        await wait_for(
            lambda: asyncio.to_thread(
                lambda: len({seq(e) for e in stored_events(s3, prefix)}) >= len(events)
            ),
            within=180,
            what="every event stored after the outage",
        )
        recovered = asyncio.get_running_loop().time() - back_at
    found = Counter(seq(e) for e in stored_events(s3, prefix))
    figures = report(
        f"object archive: store stopped {seconds:g} s under a consumer",
        **_figures(events, found, bootstrap, topic),
        seconds_to_recover=round(recovered, 2),
    )
    assert figures["lost"] == 0 and figures["dead_lettered"] == 0
    assert max(offset_of[key] for key in found) == len(events) - 1


async def test_store_stopped_5_s_holds_offsets_dead_letters_nothing_and_resumes(
    broker, topic, s3, credentials
):
    await _outage(broker, topic, s3, 5.0)


@pytest.mark.long
async def test_store_stopped_60_s_holds_offsets_dead_letters_nothing_and_resumes(
    broker, topic, s3, credentials
):
    await _outage(broker, topic, s3, 60.0)
