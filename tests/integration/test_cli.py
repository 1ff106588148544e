"""The ``lineage-proxy`` command as users run it: a real process, real signals."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import requests

from proxy.destinations.archive.destination import finished_files
from tests.support.cli import cli_process
from tests.support.doubles.target_double import TargetDouble
from tests.support.figures import report
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.load import compare, kafka_run_ids, post_events
from tests.support.paths import REPO
from tests.support.ports import free_port
from tests.support.processes import serve_process, wait_until_ready
from tests.support.sample_events import rich_run_event, run_event
from tests.support.waiting import read_until, wait_for, wait_until

pytestmark = pytest.mark.integration


HELD_RULES = """\
version: 1
destinations:
  kafka: {{kind: kafka, key: run}}
  receiver:
    kind: http
    required: true
    target: {{kind: http, url: "{url}", timeout_seconds: 60}}
rules: []
default: {{to: [kafka, receiver]}}
"""


async def test_serve_answers_every_request_in_flight_at_sigterm_then_exits_0(
    broker, topic, tmp_path: Path
):
    """32 clients' requests are in flight when SIGTERM arrives — each waiting on a required
    HTTP receiver that holds them — and are released only once the proxy is draining:
    every one is answered 2xx (none cut off) and is in Kafka, then the process exits 0."""
    clients = 32
    async with TargetDouble() as receiver:
        receiver.hold_after(0)
        rules = tmp_path / "rules.yaml"
        rules.write_text(HELD_RULES.format(url=receiver.url + receiver.path))
        process, url = serve_process(
            broker.bootstrap_servers, kafka__topic=topic, routing__rules=str(rules)
        )
        try:
            await asyncio.to_thread(wait_until_ready, url, process)
            events = [rich_run_event() for _ in range(clients)]
            load = asyncio.create_task(
                post_events(url, events, concurrency=clients, request_timeout=90)
            )
            await wait_for(lambda: receiver.held == clients, what="every request in flight")
            process.send_signal(signal.SIGTERM)
            await wait_for(lambda: "draining" in process.log(), what="the proxy to drain")
            assert not load.done() and receiver.held == clients
            receiver.release()
            result = await load
            assert await asyncio.to_thread(process.wait, 60) == 0, process.log()
        finally:
            if process.poll() is None:
                process.kill()
    found = kafka_run_ids(broker.bootstrap_servers, topic)
    figures = report(
        "sigterm_with_32_requests_in_flight",
        sent=result.sent,
        statuses=dict(result.statuses),
        **compare(result.acknowledged, found),
    )
    assert result.statuses == {200: clients}, "a request in flight was cut off by the drain"
    assert figures["found"] == clients and figures["lost"] == 0
    assert len(receiver.events) == clients


def test_serve_embedded_starts_its_own_broker_and_the_default_consumer(tmp_path: Path):
    """The quick start: proxy + embedded broker + default rules + the archive consumer."""
    port = free_port()
    consumed = tmp_path / "consumed"
    env = {
        **os.environ,
        "LINEAGE_PROXY__ROUTING__ARCHIVE_ROOT": str(tmp_path / "archive"),
        "LINEAGE_PROXY__CONSUMERS__ARCHIVE__TARGET__DIRECTORY": str(consumed),
        # Not the fixed default port nor the repository's var/spool: tests run side by
        # side, and a second proxy on one spool exits 2 (the spool is locked).
        "LINEAGE_PROXY__KAFKA__EMBEDDED_PORT": str(free_port()),
        "LINEAGE_PROXY__KAFKA__SPOOL__DIRECTORY": str(tmp_path / "spool"),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--config", "config.yaml", "--port", str(port)],
        cwd=REPO,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    event = run_event()
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_ready(url, process)
        assert requests.post(f"{url}/api/v1/lineage", json=event, timeout=10).ok
        wait_until(
            lambda: bool(list(consumed.glob("dt=*/namespace=team-a/*"))),
            30,
            "the consumer to write the event",
            alive=process,
        )
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    # On SIGTERM the consumer finished its file: one line, the event as the proxy sent it.
    [written] = finished_files(consumed)
    assert [orjson.loads(line) for line in written.read_bytes().splitlines()] == [event]


def test_serve_refuses_an_embedded_port_another_process_holds(tmp_path: Path):
    """A second ``serve`` on the fixed embedded port used to attach to the other process's
    broker (logging "Tansu on …" though its own never bound) and steal its archive
    consumer's partitions. Now: exit 2, one line naming the port and what to do; nothing
    is served. Seen failing with the port check removed (the proxy started)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        served = cli_process(
            "serve",
            "--config",
            "config.yaml",
            "--port",
            str(free_port()),
            env={
                "LINEAGE_PROXY__ROUTING__ARCHIVE_ROOT": str(tmp_path / "archive"),
                "LINEAGE_PROXY__CONSUMERS__ARCHIVE__TARGET__DIRECTORY": str(tmp_path / "out"),
                "LINEAGE_PROXY__KAFKA__EMBEDDED_PORT": str(taken),
                "LINEAGE_PROXY__KAFKA__SPOOL__DIRECTORY": str(tmp_path / "spool"),
            },
        )
    assert served.returncode == 2, served.stderr
    [line] = served.stderr.strip().splitlines()
    assert f"kafka.embedded_port {taken}" in line and "already in use" in line, line


def test_other_commands_reach_the_broker_serve_embeds(tmp_path: Path):
    """The quick start's broker is at kafka.embedded_port: dlq, replay --to-topic and
    consume reach it while serve runs, and say so in one line when none does."""
    port, broker_port = free_port(), free_port()
    env = {
        **os.environ,
        "LINEAGE_PROXY__ROUTING__ARCHIVE_ROOT": str(tmp_path / "archive"),
        "LINEAGE_PROXY__CONSUMERS__ARCHIVE__TARGET__DIRECTORY": str(tmp_path / "consumed"),
        "LINEAGE_PROXY__KAFKA__EMBEDDED_PORT": str(broker_port),
        "LINEAGE_PROXY__KAFKA__SPOOL__DIRECTORY": str(tmp_path / "spool"),
    }
    before = cli_process("dlq", "list", "--config", "config.yaml", env=env)
    assert before.returncode == 2, before.stderr
    assert f"no embedded broker listens on 127.0.0.1:{broker_port}" in before.stderr
    assert "Traceback" not in before.stderr

    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--config", "config.yaml", "--port", str(port)],
        cwd=REPO,
        env=env,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_ready(url, process)
        event = run_event(name="embedded.reached")
        assert requests.post(f"{url}/api/v1/lineage", json=event, timeout=10).ok
        # The proxy's own topic, read through the broker serve embeds at the fixed port.
        records = read_all_produced_so_far(f"127.0.0.1:{broker_port}", "openlineage.events")
        assert [orjson.loads(r.value) for r in records if b"embedded.reached" in r.value] == [event]
        listed = cli_process(
            "dlq",
            "list",
            "--config",
            "config.yaml",
            "--topic",
            "openlineage.events.rejected",
            env=env,
        )
        assert listed.returncode == 0, listed.stderr
        archive = tmp_path / "replayable"
        day = archive / "dt=2026-11-26" / "namespace=team-a"
        day.mkdir(parents=True)
        (day / "events.jsonl").write_bytes(orjson.dumps(event) + b"\n")
        replayed = cli_process(
            "replay",
            "--config",
            "config.yaml",
            "--archive",
            str(archive),
            "--to-topic",
            "openlineage.events",
            env=env,
        )
        assert replayed.returncode == 0 and "replayed 1 events" in replayed.stderr, replayed.stderr

        def reached() -> list[Any]:
            records = read_all_produced_so_far(f"127.0.0.1:{broker_port}", "openlineage.events")
            return [orjson.loads(r.value) for r in records if b"embedded.reached" in r.value]

        # The broker's high watermark may lag a produce.
        sent = read_until(reached, lambda sent: len(sent) == 2, within=30, interval=0.2)
        assert sent == [event, event]
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0


def test_bad_config_fails_at_start_naming_file_line_and_key(tmp_path: Path):
    config = tmp_path / "bad.yaml"
    config.write_text("server:\n  port: 5000\n  hots: 0.0.0.0\nkafka:\n  topic: 7\n")
    result = cli_process("serve", "--config", str(config))
    assert result.returncode == 2
    assert f"{config}:3: server.hots: unknown key" in result.stderr
    assert f"{config}:5: kafka.topic" in result.stderr


def test_bad_env_override_is_named(tmp_path: Path):
    result = cli_process(
        "serve", "--config", "config.yaml", env={"LINEAGE_PROXY__SERVER__PORT": "x"}
    )
    assert result.returncode == 2
    assert "environment LINEAGE_PROXY__SERVER__PORT: server.port" in result.stderr


def test_validate_prints_pointers_and_exits_1_on_invalid(tmp_path: Path):
    good, bad, batch = tmp_path / "good.json", tmp_path / "bad.json", tmp_path / "batch.json"
    good.write_bytes(orjson.dumps(rich_run_event()))
    broken = run_event()
    broken["run"]["runId"] = "nope"
    bad.write_bytes(orjson.dumps(broken))
    batch.write_bytes(orjson.dumps([run_event(), broken]))
    ok = cli_process("validate", str(good))
    assert ok.returncode == 0 and "valid" in ok.stdout
    result = cli_process("validate", str(good), str(bad), str(batch))
    assert result.returncode == 1
    assert f"{bad}: /run/runId:" in result.stdout
    assert f"{batch}: /1/run/runId:" in result.stdout


def test_help_is_available_for_every_command():
    for args in ([], ["serve"], ["validate"]):
        result = cli_process(*args, "--help")
        assert result.returncode == 0 and "usage:" in result.stdout
