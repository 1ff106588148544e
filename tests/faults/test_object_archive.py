"""The archive in object storage, against a real S3-compatible server (S3Proxy).

A consumer daemon reads Kafka and writes to a bucket (kind ``object_archive``). Under
load every event lands in a finished object of the archive layout; while the store is
stopped nothing is committed past what is stored and nothing is dead-lettered, and the
consumer resumes by itself. Figures: sent, found in the bucket,
duplicates, dead-lettered, seconds to recover, lost (0).

A consumer process SIGKILLed while a multipart-upload part is on the wire leaves no
partial object, and the restarted one stores every event. ``lineage-proxy consume`` runs
as a real process writing through a :class:`~tests.support.slow_link.SlowLink`: every
request passes at full speed but the body of an ``UploadPart``, which crawls (256 KiB/s),
so the kill lands with a part provably half sent (the link counted its bytes; S3Proxy
lists the multipart upload as begun and never completed). S3Proxy reports an upload's
``Initiated`` as the time of the listing, so the writer's abort of stale uploads at start
cannot find the killed one here: it stays incomplete and invisible until a bucket
lifecycle rule (docs/consumers/object-storage.md) or an explicit abort removes it.
"""

from __future__ import annotations

import asyncio
import gzip
import re
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from confluent_kafka import KafkaException

from tests.support.consumers import (
    FAST_BREAKER,
    FAST_RETRY,
    TEST_GROUP,
    committed_offsets,
    consume_process,
    consumer_config,
    create_topic,
    dead_letter_count,
    encoded,
    produce,
    running,
    seq,
    sequenced_run_events,
)
from tests.support.figures import report
from tests.support.ports import free_port
from tests.support.s3_server import BUCKET, S3Server, object_archive_target, s3_credentials
from tests.support.slow_link import SlowLink
from tests.support.tiers import starts
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
@starts("S3Proxy (a JVM)")
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
    # Duplicates are bounded by what the outage touched: the first half was stored (and
    # its uploads finished) before the store went, so none of it may come twice; only an
    # event produced during the outage, whose upload was retried, may.
    twice = {key for key, n in found.items() if n > 1}
    assert all(offset_of[key] >= half for key in twice), sorted(offset_of[k] for k in twice)
    assert figures["duplicates"] <= len(events) - half


async def test_store_stopped_5_s_holds_offsets_dead_letters_nothing_and_resumes(
    broker, topic, s3, credentials
):
    await _outage(broker, topic, s3, 5.0)


@pytest.mark.long
async def test_store_stopped_60_s_holds_offsets_dead_letters_nothing_and_resumes(
    broker, topic, s3, credentials
):
    await _outage(broker, topic, s3, 60.0)


# -- a consumer process killed mid-upload ------------------------------------------------

MiB = 1024 * 1024
# ~8.5 KB events: a 5 MiB part is ~620 of them.
_PAD = "x" * 8000
_ACKED_FIRST, _THEN = 100, 1500
_UPLOAD_ID = re.compile(r"[?&]uploadId=([^& ]+)")


def _padded(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    for _, event in events:
        event["run"]["facets"]["pad"] = {**event["run"]["facets"]["seq"], "text": _PAD}
    return events


def _write_config(path: Path, s3: S3Server, bootstrap: str, topic: str, endpoint: str) -> None:
    """Consumer ``archive`` writing through ``endpoint``: parts of 5 MiB (S3's minimum),
    objects finished after 3 s (64 MiB is never reached), commits every 0.2 s."""
    fields = {
        "endpoint_url": endpoint,
        "part_bytes": 5 * MiB,
        "max_file_bytes": 64 * MiB,
        "max_file_age_seconds": 3,
        # A lane hands all its run's events over at once: one wait for an object, not two.
        "batch_events": 500,
        "request_timeout_seconds": 30,
        "retry": FAST_RETRY,
    }
    consumer = {
        "target": target(s3, f"killed-{topic}", **fields),
        "topics": [topic],
        "group_id": f"group.{topic}",
        "group": TEST_GROUP,
        "circuit_breaker": FAST_BREAKER,
        "commit_interval_seconds": 0.2,
        "status_port": free_port(),
    }
    config = {"kafka": {"bootstrap_servers": bootstrap}, "consumers": {"archive": consumer}}
    path.write_text(yaml.safe_dump(config))


async def _committed(bootstrap: str, topic: str) -> int:
    """The group's committed offset (0: none yet); a coordinator still moving is "ask
    again" (NOT_COORDINATOR on a cluster that just started)."""
    read: list[int] = []

    async def answered() -> bool:
        group = f"group.{topic}"
        read.extend(await asyncio.to_thread(committed_offsets, bootstrap, group, topic, 1))
        return True

    await wait_for(answered, within=60, what="the committed offset", ignoring=KafkaException)
    return max(read[-1], 0)


def _keys(s3: S3Server, prefix: str) -> set[str]:
    pages = (
        s3.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{prefix}/")
    )
    return {item["Key"] for page in pages for item in page.get("Contents", [])}


def _uploads(s3: S3Server, prefix: str) -> dict[str, str]:
    """Incomplete multipart uploads under ``prefix``: upload id → key."""
    answer = s3.client().list_multipart_uploads(Bucket=BUCKET, Prefix=f"{prefix}/")
    return {u["UploadId"]: u["Key"] for u in answer.get("Uploads", [])}


async def test_consumer_killed_mid_part_upload_leaves_no_partial_object_and_reuploads(
    broker, topic, s3, credentials, tmp_path
):
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 1)
    events = _padded(sequenced_run_events(runs=10, per_run=(_ACKED_FIRST + _THEN) // 10))
    offset_of = {seq(event): i for i, (_, event) in enumerate(events)}
    prefix = f"killed-{topic}"
    config = tmp_path / "config.yaml"
    loop = asyncio.get_running_loop()

    async with SlowLink(s3.port, lambda line: "partNumber=" in line, 256 * 1024) as link:
        _write_config(config, s3, bootstrap, topic, link.endpoint)
        first = consume_process(config, "archive")
        try:
            # Events stored and acknowledged first (small objects: single PUTs, full speed).
            await asyncio.to_thread(produce, bootstrap, topic, encoded(events[:_ACKED_FIRST]))

            async def first_acknowledged() -> bool:
                return await _committed(bootstrap, topic) >= _ACKED_FIRST

            await wait_for(
                first_acknowledged, within=120, what="the first events acknowledged", alive=first
            )
            # Enough for 5 MiB parts: a part's body now crawls through the link.
            await asyncio.to_thread(produce, bootstrap, topic, encoded(events[_ACKED_FIRST:]))
            await wait_for(
                lambda: bool(link.in_flight()), within=120, what="a part on the wire", alive=first
            )
            on_the_wire = [f"{r.sent} of {r.length} bytes" for r in link.in_flight()]
        finally:
            first.send_signal(signal.SIGKILL)
            await asyncio.to_thread(first.wait)
        part = next(iter(link.in_flight()), None)
        assert part is not None, "no part on the wire at the kill"
        upload_id = _UPLOAD_ID.search(part.line)
        assert upload_id is not None, part.line
        acknowledged = await _committed(bootstrap, topic)

        # Before the restart, what a reader sees: S3Proxy lists the upload as begun and
        # not completed; its object is not visible; every visible object parses fully;
        # every acknowledged event is in one.
        uploads = await asyncio.to_thread(_uploads, s3, prefix)
        assert upload_id[1] in uploads, f"the killed upload is not listed: {uploads}"
        assert uploads[upload_id[1]] not in await asyncio.to_thread(_keys, s3, prefix)
        stored = {seq(e) for e in await asyncio.to_thread(stored_events, s3, prefix)}
        acked = {key for key, offset in offset_of.items() if offset < acknowledged}
        assert acked <= stored, f"{len(acked - stored)} acknowledged events not stored"

        # Restart on the same config; the link no longer slows anything.
        link.armed = False
        restarted_at = loop.time()
        second = consume_process(config, "archive")
        try:

            async def all_acknowledged() -> bool:
                return await _committed(bootstrap, topic) >= len(events)

            await wait_for(
                all_acknowledged, within=180, what="every event acknowledged", alive=second
            )
            recovered = loop.time() - restarted_at
        finally:
            second.send_signal(signal.SIGTERM)
            await asyncio.to_thread(second.wait, 60)
        assert second.returncode == 0, second.log()

    found = Counter(seq(e) for e in await asyncio.to_thread(stored_events, s3, prefix))
    duplicated = {key for key, n in found.items() if n > 1}
    left = await asyncio.to_thread(_uploads, s3, prefix)
    figures = report(
        "object archive: consumer SIGKILLed mid-part-upload, restarted",
        sent=len(events),
        acknowledged=acknowledged,
        found=len(found),
        lost=len(set(offset_of) - set(found)),
        duplicates=sum(n - 1 for n in found.values()),
        seconds_to_recover=round(recovered, 2),
        parts_on_the_wire_at_the_kill=on_the_wire,
        incomplete_uploads_left=len(left),
    )
    assert figures["lost"] == 0
    # Duplicates only among events the killed process had not acknowledged.
    assert all(offset_of[key] >= acknowledged for key in duplicated), sorted(duplicated)[:5]
    assert figures["duplicates"] <= len(events) - acknowledged
    # Never completed, never visible: removed the way a lifecycle rule would.
    client = s3.client()
    for upload, key in left.items():
        await asyncio.to_thread(
            client.abort_multipart_upload, Bucket=BUCKET, Key=key, UploadId=upload
        )
