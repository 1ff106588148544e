"""Clients that leave, stall or speak broken HTTP, against a real proxy on real sockets.

What must hold: no traceback and a bounded log whatever they do, counted as client
errors (never as status 500), slow clients cut off by the header/body/idle deadlines,
open connections capped, and a well-behaved client served promptly all along.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from urllib.parse import urlsplit

import orjson
import pytest
from aiohttp import ClientSession

from tests.support.figures import report
from tests.support.metrics import metrics_of, sample
from tests.support.sample_events import run_event
from tests.support.waiting import eventually, wait_for

pytestmark = pytest.mark.integration

POST_HEAD = b"POST /api/v1/lineage HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"


async def metric(url: str, name: str, **labels: str) -> float:
    """The value of one sample of the proxy's /metrics (0 when absent)."""
    return sample(await metrics_of(url), name, **labels) or 0.0


async def connect(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    parts = urlsplit(url)
    return await asyncio.open_connection(parts.hostname, parts.port)


async def timed_post(url: str) -> tuple[int, float]:
    started = time.monotonic()
    body = orjson.dumps(run_event())
    async with ClientSession() as session, session.post(f"{url}/api/v1/lineage", data=body) as r:
        await r.read()
        return r.status, time.monotonic() - started


def log_size(caplog: pytest.LogCaptureFixture) -> tuple[int, int]:
    """(lines, bytes) the proxy logged, tracebacks included."""
    text = caplog.text
    return len(text.splitlines()), len(text.encode())


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def test_clients_leaving_mid_body_are_counted_as_client_errors_not_500s(start_proxy, caplog):
    caplog.set_level(logging.INFO)
    clients = 300
    async with start_proxy(server={"body_timeout_seconds": 3}) as url:

        async def leave(i: int) -> None:
            _, writer = await connect(url)
            writer.write(POST_HEAD + b"Content-Length: 5000\r\n\r\n" + b'{"eventTime": ' * 3)
            await writer.drain()
            if i % 2:  # half leave at once, half after the handler has started reading
                await asyncio.sleep(0.05)
            writer.close()

        for start in range(0, clients, 50):
            await asyncio.gather(*(leave(i) for i in range(start, start + 50)))

        async def all_counted() -> bool:
            return await metric(url, "lineage_proxy_client_errors_total") >= clients

        counted = await eventually(all_counted, within=20)
        disconnected = await metric(url, "lineage_proxy_client_errors_total", kind="disconnected")
        errors_500 = await metric(url, "lineage_proxy_http_requests_total", status="500")
        status, _ = await timed_post(url)
    lines, size = log_size(caplog)
    report(
        "clients_leaving_mid_body",
        clients=clients,
        counted_as_client_errors=disconnected,
        status_500=errors_500,
        log_lines=lines,
        log_bytes=size,
    )
    assert counted, "every client that left is counted as a client error"
    assert disconnected >= clients / 2
    assert errors_500 == 0
    assert tracebacks(caplog) == []
    faults = [r for r in caplog.records if r.name == "proxy.web.client_faults"]
    assert 1 <= len(faults) <= 4, [r.getMessage() for r in faults]
    assert status == 200


async def test_malformed_http_gets_400_without_a_traceback_and_is_counted(start_proxy, caplog):
    caplog.set_level(logging.INFO)
    clients = 100
    bad = POST_HEAD + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc"
    async with start_proxy() as url:

        async def send_bad() -> bytes:
            reader, writer = await connect(url)
            writer.write(bad)
            answer = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            return answer

        answers = await asyncio.gather(*(send_bad() for _ in range(clients)))
        counted = await metric(url, "lineage_proxy_client_errors_total", kind="bad_http")
    assert all(a.startswith(b"HTTP/1.1 400") or a.startswith(b"HTTP/1.0 400") for a in answers)
    assert counted == clients
    assert tracebacks(caplog) == []
    assert len([r for r in caplog.records if r.name == "proxy.web.client_faults"]) <= 2


async def test_slowloris_connections_are_closed_after_the_header_timeout(start_proxy, caplog):
    caplog.set_level(logging.INFO)
    clients, timeout = 300, 1.0
    async with start_proxy(server={"header_timeout_seconds": timeout}) as url:

        async def trickle() -> tuple[float, bytes]:
            reader, writer = await connect(url)
            opened = time.monotonic()
            writer.write(POST_HEAD)
            answer = b""
            try:
                for _ in range(100):  # one header byte every 0.2 s: 20 s if never cut off
                    writer.write(b"X")
                    await writer.drain()
                    try:
                        answer = await asyncio.wait_for(reader.read(4096), 0.2)
                    except TimeoutError:
                        continue
                    break
            except ConnectionError:
                pass
            writer.close()
            return time.monotonic() - opened, answer

        slow = asyncio.gather(*(trickle() for _ in range(clients)))
        await asyncio.sleep(0.3)
        status, latency = await timed_post(url)
        held = await slow
        timeouts = await metric(url, "lineage_proxy_client_errors_total", kind="header_timeout")
    longest = max(seconds for seconds, _ in held)
    lines, size = log_size(caplog)
    report(
        "slowloris_header_timeout",
        connections=clients,
        header_timeout_seconds=timeout,
        longest_held_seconds=round(longest, 2),
        normal_request_seconds=round(latency, 3),
        log_lines=lines,
        log_bytes=size,
    )
    assert status == 200
    assert all(answer.startswith(b"HTTP/1.1 408") for _, answer in held)
    assert longest < 10, "cut off near the 1 s header deadline, not after 20 s of trickling"
    assert timeouts == clients
    assert tracebacks(caplog) == []


async def test_a_stalled_body_gets_408_and_an_idle_connection_is_closed(start_proxy):
    server = {"body_timeout_seconds": 1, "keepalive_timeout_seconds": 1}
    async with start_proxy(server=server) as url:
        reader, writer = await connect(url)
        writer.write(POST_HEAD + b"Content-Length: 100\r\n\r\n{")
        stalled = await asyncio.wait_for(reader.readuntil(b"]}"), 15)  # the 408, then closed
        writer.close()

        reader, writer = await connect(url)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: proxy\r\n\r\n")
        first = await asyncio.wait_for(reader.readuntil(b'"ok"}'), 10)
        idle_started = time.monotonic()
        rest = await asyncio.wait_for(reader.read(), 15)  # EOF: the proxy closed it
        idle_seconds = time.monotonic() - idle_started
        writer.close()
    assert stalled.startswith(b"HTTP/1.1 408") and b'"body_timeout"' in stalled
    assert first.startswith(b"HTTP/1.1 200") and rest == b""
    assert idle_seconds < 10


def _enough_file_descriptors(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            pytest.skip(f"needs {needed} file descriptors, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


async def _idle_keepalive_connection(url: str) -> asyncio.StreamWriter:
    """A connection that made one request and stays open (HTTP/1.1 keep-alive)."""
    reader, writer = await connect(url)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: proxy\r\n\r\n")
    answer = await asyncio.wait_for(reader.readuntil(b'"ok"}'), 30)
    assert answer.startswith(b"HTTP/1.1 200")
    return writer


@pytest.mark.slow
async def test_two_thousand_idle_connections_do_not_delay_a_normal_request(start_proxy):
    idle = 2000
    _enough_file_descriptors(2 * idle + 1024)  # both ends live in this process
    async with start_proxy() as url:
        writers: list[asyncio.StreamWriter] = []
        for start in range(0, idle, 200):
            writers += await asyncio.gather(
                *(_idle_keepalive_connection(url) for _ in range(start, start + 200))
            )
        open_connections = await metric(url, "lineage_proxy_open_connections")
        answers = [await timed_post(url) for _ in range(20)]
        for writer in writers:
            writer.close()
    slowest = max(seconds for _, seconds in answers)
    report(
        "idle_keepalive_connections",
        idle_connections=idle,
        open_connections=open_connections,
        normal_requests=len(answers),
        slowest_normal_request_seconds=round(slowest, 3),
    )
    assert open_connections >= idle
    assert all(status == 200 for status, _ in answers)
    assert slowest < 5, "a generous bound: an idle connection costs the loop nothing"


async def test_connections_beyond_the_cap_get_503_until_one_closes(start_proxy):
    cap = 50
    async with start_proxy(server={"max_connections": cap}) as url:
        # /metrics below needs a connection of its own: fill all but that one.
        writers = await asyncio.gather(*(_idle_keepalive_connection(url) for _ in range(cap)))
        reader, writer = await connect(url)
        refused = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        for writer in writers[:5]:
            writer.close()

        scrapes_refused = 0

        async def closes_seen() -> bool:  # a scrape is refused (503) while the cap is full
            nonlocal scrapes_refused
            async with ClientSession() as session, session.get(f"{url}/metrics") as resp:
                text = await resp.text()
            scrapes_refused += resp.status == 503
            open_now = sample(text, "lineage_proxy_open_connections") if resp.ok else None
            return open_now is not None and open_now <= cap - 5 + 1  # + the scrape's own

        await wait_for(closes_seen, what="the proxy to see five connections closed")
        status, _ = await timed_post(url)
        refusals = await metric(url, "lineage_proxy_connections_refused_total")
        for writer in writers[5:]:
            writer.close()
    assert refused.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in refused
    assert b'"too_many_connections"' in refused
    assert status == 200
    assert refusals == 1 + scrapes_refused
