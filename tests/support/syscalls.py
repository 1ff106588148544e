"""Recording the proxy's system calls with strace, and reading the recording: what the
fsync-before-2xx tests check (tests/integration/test_fsync_before_2xx.py for the spool,
test_archive_durable_before_2xx.py for the archive).

Nothing else can catch a missing fsync: a killed process leaves its writes in the page
cache, so crash tests find the data either way; only a power loss would not, and no test
pulls the plug. The order of the calls is what the promise is made of, so it is what is
checked: a data file's fsync finishing after its last write and before the response is
written to the request's socket, and an fsync of the directory holding the file (on a
descriptor opened ``O_RDONLY | O_DIRECTORY`` on it) after the file was created and before
the response — a file's data survives a power loss only if its name does. strace is a
Debian package (scripts/test.sh installs it).
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

from tests.support.processes import ServeProcess, serve_process, wait_until_alive

__all__ = [
    "ARCHIVE_FILE",
    "SEGMENT",
    "assert_synced_before_answers",
    "directory_synced_before_answer",
    "post_on_own_connection",
    "synced_before_answer",
    "traced_proxy",
]

# The calls a durable answer is made of: writing and syncing files, and answering on a
# socket (the default loop sends with send(), uvloop writes with write()/writev()).
TRACED = "openat,fsync,fdatasync,write,writev,pwrite64,sendto,sendmsg"
# One strace line: "<pid> <call>(<fd><path or socket>, …" or the end of a call that
# another thread interrupted: "<pid> <... <call> resumed>…".
CALL = re.compile(r"^\d+\s+(?P<call>\w+)\((?P<fd>\d+)<(?P<what>[^<]*?)>(?=[,) ])")
RESUMED = re.compile(r"^\d+\s+<\.\.\. (?P<call>\w+) resumed>")
UNFINISHED = "<unfinished ...>"
# "<pid> openat(<dirfd>, "<path>", <flags>[, <mode>]) = <fd><path>" (or unfinished), and the
# descriptor an openat returned, at the end of its line or of its resumed line.
OPENAT = re.compile(r'^\d+\s+openat\([^,]*, "(?:[^"\\]|\\.)*"(?:\.\.\.)?, (?P<flags>[A-Z_|]+)')
RETURNED = re.compile(r"= (?P<fd>\d+)<(?P<what>[^<>]*)>$")
ANSWERS = {"write", "writev", "sendto", "sendmsg"}


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
        # Alive is enough (/readyz says "not ready" while Kafka is unreachable); a start
        # under strace is slow.
        wait_until_alive(url, process, 120)
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
        if _answers(client, name, what):
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


def _answers(client: str, call: str, what: str) -> bool:
    """Whether ``call`` on ``what`` writes the response on ``client``'s connection."""
    return what.startswith("TCP:") and client in what and call in ANSWERS


class _Names:
    """What the trace says, up to a point, about names: the data files created (line of
    their creation), the descriptors opened ``O_RDONLY | O_DIRECTORY`` on a directory, and
    the line each directory's last successful fsync on such a descriptor ended on."""

    def __init__(self, data_file: re.Pattern[str]) -> None:
        self.data_file = data_file
        self.created: dict[str, int] = {}
        self.directory_fds: set[tuple[str, str]] = set()
        self.directory_synced: dict[str, int] = {}

    def opened(self, flags: str, line: str, number: int) -> None:
        returned = RETURNED.search(line.rstrip())
        if returned is None:
            return  # failed (= -1 ENOENT…)
        fd, what = returned["fd"], returned["what"]
        names = set(flags.split("|"))
        if "O_CREAT" in names and self.data_file.search(what):
            self.created[what] = number
        if {"O_RDONLY", "O_DIRECTORY"} <= names:
            self.directory_fds.add((fd, what))

    def synced(self, directory: str, line: str, number: int) -> None:
        if line.rstrip().endswith("= 0"):
            self.directory_synced[directory] = number


def directory_synced_before_answer(trace: str, client: str, data_file: re.Pattern[str]) -> bool:
    """Whether, before the first write of the response on ``client``'s connection, the
    directory holding the ``data_file`` written last was fsynced (on a descriptor opened
    ``O_RDONLY | O_DIRECTORY`` on it) after that file was created."""
    names = _Names(data_file)
    written: str | None = None
    pending: dict[str, tuple[str, str]] = {}  # pid → ("openat", flags) | ("fsync", dir)
    for number, line in enumerate(trace.splitlines()):
        pid = line.split(" ", 1)[0]
        resumed = RESUMED.match(line)
        if resumed:
            left, argument = pending.pop(pid, ("", ""))
            if left == "openat":
                names.opened(argument, line, number)
            elif left == "fsync":
                names.synced(argument, line, number)
            continue
        unfinished = line.rstrip().endswith(UNFINISHED)
        opening = OPENAT.match(line)
        if opening:
            if unfinished:
                pending[pid] = ("openat", opening["flags"])
            else:
                names.opened(opening["flags"], line, number)
            continue
        call = CALL.match(line)
        if call is None:
            continue
        name, fd, what = call["call"], call["fd"], call["what"]
        if _answers(client, name, what):
            if written is None:
                return False
            created = names.created.get(written, number)
            return names.directory_synced.get(os.path.dirname(written), -1) > created
        if name == "fsync" and (fd, what) in names.directory_fds:
            if unfinished:
                pending[pid] = ("fsync", what)
            else:
                names.synced(what, line, number)
        elif data_file.search(what) and name not in {"fsync", "fdatasync"}:
            written = what
    raise AssertionError(f"no answer on {client}'s connection in the trace")


def assert_synced_before_answers(
    trace: str, clients: list[str], data_file: re.Pattern[str]
) -> None:
    """For every client: its 2xx came after the fsync of the data it wrote and after the
    fsync of the directory naming the file (see the module doc)."""
    unsynced = [c for c in clients if not synced_before_answer(trace, c, data_file)]
    assert unsynced == [], f"2xx before the data file's fsync on {unsynced}"
    unnamed = [c for c in clients if not directory_synced_before_answer(trace, c, data_file)]
    assert unnamed == [], f"2xx before the new file's directory was fsynced on {unnamed}"


# The files the fsyncs are asked of: a spool segment, an archive file (in progress too).
SEGMENT = re.compile(r"/segment-\d+\.spool$")
ARCHIVE_FILE = re.compile(r"/archive/.*\.jsonl")
