"""A 2xx is sent only after the event's bytes are fsynced: the system calls of the proxy
process, recorded with strace, show the fsync of the spool segment (Kafka unreachable) or
of the archive file (an archive route) finishing before the response is written to that
request's socket.

Nothing else can catch a missing fsync: a killed process leaves its writes in the page
cache, so crash tests find the data either way; only a power loss would not, and no test
pulls the plug. The order of the calls is what the promise is made of, so it is what is
checked. strace is a Debian package (scripts/test.sh installs it).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
import requests

from tests.sample_events import run_event
from tests.support.ports import free_port
from tests.support.processes import ServeProcess, serve_process
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

REQUESTS = 5
ARCHIVE_RULES = """\
version: 1
destinations:
  archive: {kind: archive, directory: events}
rules: []
default: {to: [archive]}
"""
# The calls a durable answer is made of: writing and syncing files, and answering on a
# socket (the default loop sends with send(), uvloop writes with write()/writev()).
TRACED = "fsync,fdatasync,write,writev,pwrite64,sendto,sendmsg"
# One strace line: "<pid> <call>(<fd><path or socket>, …" or the end of a call that
# another thread interrupted: "<pid> <... <call> resumed>…".
CALL = re.compile(r"^\d+\s+(?P<call>\w+)\((?P<fd>\d+)<(?P<what>[^<]*?)>(?=[,) ])")
RESUMED = re.compile(r"^\d+\s+<\.\.\. (?P<call>\w+) resumed>")
UNFINISHED = "<unfinished ...>"


@contextmanager
def traced_proxy(tmp_path: Path, broker: str, **settings: str) -> Iterator[tuple[str, Path]]:
    """``lineage-proxy serve`` under ``strace -f``; yields its URL and the trace file,
    complete once the block ends (the proxy is killed, strace then writes its last lines
    and exits)."""
    strace = shutil.which("strace")
    assert strace, "strace is not installed (apt-get install strace; scripts/test.sh does)"
    trace = tmp_path / "trace.txt"
    command = [strace, "-f", "-qq", "-yy", "-s", "16", "-e", f"trace={TRACED}", "-o", str(trace)]
    # (mypy cannot tell that ``settings`` holds no "port" or "under" key)
    process, url = serve_process(broker, under=[*command, "--"], **settings)  # type: ignore[arg-type]
    try:
        # Alive is enough (/readyz says "not ready" while Kafka is unreachable).
        wait_until(
            lambda: requests.get(f"{url}/healthz", timeout=10).ok,
            120,
            "the traced proxy to answer",
            alive=process,
            ignoring=requests.RequestException,
        )
        yield url, trace
    finally:
        _kill_traced(process)


def _kill_traced(process: ServeProcess) -> None:
    """SIGKILL the proxy (strace's child), then let strace finish the trace and exit."""
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
    if children.exists():
        for pid in children.read_text().split():
            os.kill(int(pid), signal.SIGKILL)
    try:
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def post_on_own_connection(url: str, event: dict[str, object]) -> tuple[int, str]:
    """POST ``event`` on a fresh connection; its status and the connection's address as
    the proxy's side of the socket shows it in the trace (``127.0.0.1:port``)."""
    host, port = url.removeprefix("http://").split(":")
    body = orjson.dumps(event)
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        client = "{}:{}".format(*sock.getsockname())
        sock.sendall(
            b"POST /api/v1/lineage HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1]), client


def synced_before_answer(trace: str, client: str, data_file: re.Pattern[str]) -> bool:
    """Whether, before the first write of the response on ``client``'s connection, the
    last write to a ``data_file`` was followed by a finished fsync/fdatasync of one."""
    written_since_sync = False
    wrote_any = False
    pending: dict[str, str] = {}  # pid → the call it left unfinished (a data-file sync)
    for line in trace.splitlines():
        pid = line.split(" ", 1)[0]
        resumed = RESUMED.match(line)
        if resumed:
            if pending.pop(pid, None) == "sync":
                written_since_sync = False
            continue
        call = CALL.match(line)
        if call is None:
            continue
        name, what = call["call"], call["what"]
        if (
            what.startswith("TCP:")
            and client in what
            and name in {"write", "writev", "sendto", "sendmsg"}
        ):
            return wrote_any and not written_since_sync
        if data_file.search(what):
            if name in {"fsync", "fdatasync"}:
                if line.rstrip().endswith(UNFINISHED):
                    pending[pid] = "sync"
                else:
                    written_since_sync = False
            else:
                written_since_sync = wrote_any = True
    raise AssertionError(f"no answer on {client}'s connection in the trace")


def post_one_by_one(url: str) -> list[str]:
    """POST REQUESTS events one after another, each on its own connection (so that each
    answer follows its own sync); every one must be a 200. Their client addresses."""
    clients = []
    for _ in range(REQUESTS):
        status, client = post_on_own_connection(url, run_event())
        assert status == 200, status
        clients.append(client)
    return clients


@pytest.mark.slow
def test_a_spooled_event_is_fsynced_before_its_2xx(tmp_path: Path) -> None:
    # Kafka is unreachable (nothing listens there): every event goes to the spool.
    with traced_proxy(
        tmp_path,
        f"127.0.0.1:{free_port()}",
        kafka__spool__after_seconds="0.2",
        kafka__create_topics="false",
        server__run_consumers="[]",
    ) as (url, trace):
        clients = post_one_by_one(url)
    recorded = trace.read_text()
    unsynced = [c for c in clients if not synced_before_answer(recorded, c, SEGMENT)]
    assert unsynced == [], f"2xx before the spool's fsync on {unsynced}"


@pytest.mark.slow
def test_an_archived_event_is_fsynced_before_its_2xx(tmp_path: Path, broker) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(ARCHIVE_RULES)
    with traced_proxy(
        tmp_path,
        broker.bootstrap_servers,
        routing__rules=str(rules),
        routing__archive_root=str(tmp_path / "archive"),
        routing__reload_interval_seconds="0",
        server__run_consumers="[]",
    ) as (url, trace):
        clients = post_one_by_one(url)
    recorded = trace.read_text()
    unsynced = [c for c in clients if not synced_before_answer(recorded, c, ARCHIVE_FILE)]
    assert unsynced == [], f"2xx before the archive file's fsync on {unsynced}"


SEGMENT = re.compile(r"/segment-\d+\.spool$")
ARCHIVE_FILE = re.compile(r"/archive/.*\.jsonl")
