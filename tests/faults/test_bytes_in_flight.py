"""200 slow uploads and a volley of gzip bombs against the real proxy process: its memory
stays bounded by ``server.max_bytes_in_flight`` and comes back after the burst.

RSS is read from /proc: ``VmHWM`` (the peak, reset through ``clear_refs`` once the proxy
is warm) and ``VmRSS`` (now). The bound stated here: the warm RSS plus the cap plus
160 MiB for what is not request bytes (aiohttp's per-connection buffers, the allocator's
slack, the copies of one body being joined or inflated). Without a cap the uploads alone
hold 200 x 3 MiB (1,107 MiB peak with the cap off; 178 MiB over warm with it, once, on a
loaded machine).
"""

from __future__ import annotations

import asyncio
import gzip
from urllib.parse import urlsplit

import orjson
import pytest
from aiohttp import ClientSession

from tests.support.figures import report
from tests.support.process_memory import reset_peak, rss
from tests.support.processes import serve_process, wait_until_ready
from tests.support.sample_events import run_event
from tests.support.waiting import eventually, wait_for

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
CAP = 64 * MiB
SLACK = 160 * MiB
UPLOADS = 200
UPLOADED = 3 * MiB  # sent of a declared 5 MiB body, then the client stalls
BOMBS = 16
BOMB = gzip.compress(b" " * (64 * MiB), compresslevel=9)  # ~64 KB inflating to 64 MiB


async def status_of(reader: asyncio.StreamReader) -> int:
    line = await reader.readline()
    return int(line.split()[1]) if line else 0


async def slow_upload(host: str, port: int, writers: list[asyncio.StreamWriter]) -> int:
    """Declare 5 MiB, send 3, stall: the proxy's answer (0 when the client leaves first)."""
    reader, writer = await asyncio.open_connection(host, port)
    writers.append(writer)
    writer.write(
        b"POST /api/v1/lineage HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % (5 * MiB)
    )
    writer.write(b"[" + b" " * (UPLOADED - 1))
    try:
        return await status_of(reader)
    except ConnectionError:
        return 0


async def held_bytes(url: str) -> int:
    """The proxy's own figure: lineage_proxy_request_bytes_in_flight."""
    async with ClientSession() as session, session.get(f"{url}/metrics") as response:
        text = await response.text()
    for line in text.splitlines():
        if line.startswith("lineage_proxy_request_bytes_in_flight "):
            return int(float(line.split()[1]))
    raise AssertionError("no lineage_proxy_request_bytes_in_flight in /metrics")


async def held_bytes_is(url: str, expected: int) -> bool:
    return await held_bytes(url) == expected


async def gzip_bomb(host: str, port: int) -> int:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        b"POST /api/v1/lineage/batch HTTP/1.1\r\nHost: proxy\r\nContent-Encoding: gzip\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(BOMB) + BOMB
    )
    status = await status_of(reader)
    writer.close()
    return status


async def test_slow_uploads_and_gzip_bombs_hold_rss_under_the_cap_and_it_comes_back(broker):
    process, url = serve_process(
        broker.bootstrap_servers,
        server__max_bytes_in_flight=str(CAP),
        server__max_gzip_ratio="100000",  # the bombs pass the ratio check: only size stops them
        server__run_consumers="[]",
        server__max_connections="1000",
    )
    try:
        wait_until_ready(url, process)
        parts = urlsplit(url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 0
        good = orjson.dumps(run_event())
        for _ in range(20):  # warm: every code path of a good request has run
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(
                b"POST /api/v1/lineage HTTP/1.1\r\nHost: p\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n" % len(good) + good
            )
            assert await status_of(reader) == 200
            writer.close()
        warm = rss(process.pid, "VmRSS")
        reset_peak(process.pid)

        writers: list[asyncio.StreamWriter] = []
        bombs = asyncio.gather(*(gzip_bomb(host, port) for _ in range(BOMBS)))
        uploads = [asyncio.ensure_future(slow_upload(host, port, writers)) for _ in range(UPLOADS)]
        bomb_statuses = await bombs

        async def every_upload_held_or_refused() -> bool:
            # Held ones are read to their last byte sent; the others were answered.
            held = await held_bytes(url)
            answered = sum(1 for u in uploads if u.done())
            return held % UPLOADED == 0 and held // UPLOADED + answered == UPLOADS

        await wait_for(every_upload_held_or_refused, 120, "the proxy to take in every upload")
        stalled = (await held_bytes(url)) // UPLOADED
        peak = rss(process.pid, "VmHWM")
        held = peak - warm

        for writer in writers:  # the burst ends: the clients leave
            writer.close()
        statuses = await asyncio.gather(*uploads)
        await wait_for(lambda: held_bytes_is(url, 0), 60, "the proxy to give back every byte")
        came_back = await eventually(lambda: rss(process.pid, "VmRSS") < warm + 32 * MiB, 30)
        after = rss(process.pid, "VmRSS")
        refused = sum(1 for s in statuses if s == 503)
        report(
            "bytes_in_flight",
            uploads=UPLOADS,
            uploads_held=stalled,
            uploads_refused_503=refused,
            # Cut off unanswered (header deadline on a loaded box, or the client left).
            uploads_closed=UPLOADS - refused - stalled,
            bombs=BOMBS,
            bomb_statuses=sorted(set(bomb_statuses)),
            cap_mib=CAP // MiB,
            rss_warm_mib=round(warm / MiB, 1),
            rss_peak_mib=round(peak / MiB, 1),
            rss_bound_mib=round((warm + CAP + SLACK) / MiB, 1),
            rss_after_mib=round(after / MiB, 1),
        )
        assert peak < warm + CAP + SLACK, f"peak {held / MiB:.0f} MiB over the warm RSS"
        assert came_back, f"RSS {after / MiB:.0f} MiB after the burst, warm {warm / MiB:.0f}"
        # Uploads past the cap were told to come back, not held.
        assert refused > 0 and stalled * UPLOADED <= CAP
        assert set(bomb_statuses) <= {413, 503}
        # The proxy serves again once the bytes are given back.
        await wait_for(lambda: process.poll() is None)
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(
            b"POST /api/v1/lineage HTTP/1.1\r\nHost: p\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n" % len(good) + good
        )
        assert await status_of(reader) == 200
        writer.close()
    finally:
        process.terminate()
        process.wait(30)
