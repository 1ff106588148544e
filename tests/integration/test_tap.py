"""``lineage-proxy tap`` against a real proxy: what it shows, to whom, and that a reader
who reads nothing never slows ingest (docs/operate/tap.md)."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from aiohttp import ClientSession

from proxy.server.serve import serving
from proxy.tap.client import TapFailed, tap_events
from proxy.web.app import create_app
from proxy.web.keys import METRICS, TAP
from tests.integration.test_lineage_endpoint import post
from tests.support.figures import report
from tests.support.processes import serve_process, wait_until_ready
from tests.support.proxies import proxy_config
from tests.support.sample_events import run_event
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

RULES = """
version: 1
destinations:
  kafka: {kind: kafka, key: run}
rules:
  - name: team-a
    match: {job_namespace: "team-a*"}
    to: [kafka]
default:
  to: [kafka]
"""
AUTH = {
    "enabled": True,
    "tokens": [
        {"name": "team-a", "token": "secret-a", "namespaces": ["team-a*"]},
        {"name": "admin", "token": "secret-admin"},
    ],
}
ADMIN = {"Authorization": "Bearer secret-admin"}


def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES)
    return path


async def line(stream: asyncio.StreamReader | None) -> str:
    assert stream is not None, "the process was started without this pipe"
    return (await asyncio.wait_for(stream.readline(), 30)).decode()


async def test_tap_cli_prints_accepted_events_with_rules_and_destinations_filtered(
    start_proxy, tmp_path
):
    async with start_proxy(routing={"rules": rules_file(tmp_path)}) as url:
        tap = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "proxy", "tap", "--url", url, "--format", "json"),
            *("--namespace", "team-a*", "--event-type", "complete", "--limit", "2"),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert "watching" in await line(tap.stderr)
            wanted = [run_event(namespace="team-a", event_type="COMPLETE") for _ in range(2)]
            invalid = run_event(namespace="team-a", event_type="COMPLETE")
            invalid["run"]["runId"] = "not-a-uuid"
            others = [
                run_event(namespace="team-a", event_type="START"),
                run_event(namespace="team-b", event_type="COMPLETE"),
            ]
            endpoint = f"{url}/api/v1/lineage"
            for event in [others[0], invalid, others[1], *wanted]:
                await post(endpoint, event)
            out, err = await asyncio.wait_for(tap.communicate(), 30)
        finally:
            if tap.returncode is None:
                tap.kill()
                await tap.wait()
    assert tap.returncode == 0, err
    records = [orjson.loads(text) for text in out.decode().splitlines()]
    assert [r["event"]["run"]["runId"] for r in records] == [e["run"]["runId"] for e in wanted]
    assert all(r["rules"] == ["team-a"] and r["destinations"] == ["kafka"] for r in records)


async def test_tap_needs_a_token_and_shows_a_token_only_its_namespaces(start_proxy, tmp_path):
    async with start_proxy(auth=AUTH, routing={"rules": rules_file(tmp_path)}) as url:
        refused = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "proxy", "tap", "--url", url, "--limit", "1"),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(refused.communicate(), 30)
        assert refused.returncode == 1
        assert len(err.decode().splitlines()) == 1 and "401" in err.decode(), err
        with pytest.raises(TapFailed, match="401"):
            await tap_events(url, {}, "wrong", lambda record: False, print)

        seen: dict[str, list[dict]] = {"team-a": [], "default-route": []}
        connected = {name: asyncio.Event() for name in seen}

        async def watch(name: str, token: str, query: dict[str, str]) -> None:
            def on_event(record: dict) -> bool:
                seen[name].append(record)
                return len(seen[name]) < 2

            def on_note(note: str) -> None:
                connected[name].set()

            await tap_events(url, query, token, on_event, on_note)

        watchers = [
            asyncio.create_task(watch("team-a", "secret-a", {})),
            asyncio.create_task(watch("default-route", "secret-admin", {"rule": "(default)"})),
        ]
        try:
            for ready in connected.values():
                await asyncio.wait_for(ready.wait(), 30)
            events = [run_event(namespace=ns) for ns in ("team-b", "team-a", "team-c", "team-a")]
            for event in events:
                assert (await post(f"{url}/api/v1/lineage", event, **ADMIN))[0] == 200
            await asyncio.wait_for(asyncio.gather(*watchers), 30)
        finally:
            for watcher in watchers:
                watcher.cancel()
    namespaces = {
        name: [r["event"]["job"]["namespace"] for r in records] for name, records in seen.items()
    }
    assert namespaces == {"team-a": ["team-a", "team-a"], "default-route": ["team-b", "team-c"]}
    assert all(r["rules"] == ["(default)"] for r in seen["default-route"])


async def test_a_tap_reader_that_reads_nothing_never_slows_ingest(broker, topic):
    config = proxy_config(broker.bootstrap_servers, topic, server={"host": "127.0.0.1", "port": 0})
    app = create_app(config)
    app[TAP].queue_size = 8  # falls behind after a few events, whatever the socket buffers
    async with serving(app) as port:
        url = f"http://127.0.0.1:{port}"
        # A reader with a tiny receive window that, after the first bytes, reads nothing.
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.settimeout(30)
        stalled.connect(("127.0.0.1", port))
        stalled.sendall(b"GET /api/v1/tap HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b" 200 " in await asyncio.to_thread(stalled.recv, 64)
        try:
            started = time.monotonic()
            batches = [[run_event() for _ in range(500)] for _ in range(4)]
            async with ClientSession() as session:
                for batch in batches:
                    async with session.post(
                        f"{url}/api/v1/lineage/batch", data=orjson.dumps(batch)
                    ) as response:
                        assert response.status == 200
                        assert (await response.json())["summary"]["successful"] == 500
            seconds = time.monotonic() - started
            dropped = app[TAP].dropped_total
            assert dropped > 0
            assert app[METRICS].accepted.labels("run")._value.get() == 2000
            # Once it reads again, the stream says what it missed.
            received = b""

            async def told_what_it_missed() -> bool:
                nonlocal received
                received += await asyncio.to_thread(stalled.recv, 65536)
                return b"event: dropped" in received

            await wait_for(told_what_it_missed, 30, "the stream to say what the reader missed")
        finally:
            stalled.close()
    report(
        "test_a_tap_reader_that_reads_nothing_never_slows_ingest",
        sent=2000,
        acknowledged=2000,
        dropped_for_the_stalled_reader=dropped,
        seconds_for_2000_events=round(seconds, 2),
    )


def test_sigterm_ends_an_open_tap_instead_of_waiting_for_it(broker):
    # A shutdown budget far above the usual second: an open tap must not use it up.
    proxy, url = serve_process(broker.bootstrap_servers, server__shutdown_timeout_seconds="120")
    try:
        wait_until_ready(url, proxy)
        tap = subprocess.Popen(
            [sys.executable, "-m", "proxy", "tap", "--url", url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert tap.stderr is not None and "watching" in tap.stderr.readline()
        started = time.monotonic()
        proxy.send_signal(signal.SIGTERM)
        assert proxy.wait(timeout=150) == 0, proxy.log()
        stopped_after = time.monotonic() - started
        _, err = tap.communicate(timeout=30)
    finally:
        proxy.kill()
    assert stopped_after < 60, proxy.log()
    assert tap.returncode == 1 and "ended the stream" in err
