"""A 2xx from the proxy means the event's line is in an archive file, durably: another
process, reading the files (in-progress ones too), finds it right after each answer, and
the proxy's system calls (recorded with strace, tests/support/syscalls.py) show the
file's fsync after the line's write, and the fsync of the directory naming a new file,
finishing before the answer is written to that request's socket.

A reader alone cannot tell a line in the page cache from one on the disk — another
process sees both — so it would pass without the fsync; the recorded calls cannot.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.sample_events import rich_run_event
from tests.support.syscalls import (
    ARCHIVE_FILE,
    assert_synced_before_answers,
    post_on_own_connection,
    traced_proxy,
)

pytestmark = pytest.mark.integration

EVENTS = 10
RULES = """\
version: 1
destinations:
  archive: {kind: archive, directory: events}
rules: []
default: {to: [archive]}
"""

# Reads one runId per line from stdin and answers 1 if a whole line of some archive file
# under argv[1] holds that event, else 0. A separate process: it sees only what reached
# the file system, nothing of the proxy's memory.
READER = """
import sys, json, pathlib
root = pathlib.Path(sys.argv[1])
for request in sys.stdin:
    run_id = request.strip()
    found = any(
        line.endswith(b"\\n") and json.loads(line)["run"]["runId"] == run_id
        for path in root.rglob("*.jsonl*")
        for line in path.read_bytes().splitlines(keepends=True)
    )
    print(int(found), flush=True)
"""


@pytest.mark.slow
def test_each_2xx_line_is_fsynced_and_readable_by_another_process_right_away(
    tmp_path: Path, broker
) -> None:
    """Seen failing with the archive's fsync of the file's data removed (``os.fsync``
    after ``write_all`` in ``ArchiveWriter._append``): every client was listed as
    answered before the data file's fsync, while the reader still found every line; and
    with the new file's ``fsync_directory(folder)`` removed (answered before the
    directory's fsync)."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    archive = tmp_path / "archive"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(archive)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert reader.stdin is not None and reader.stdout is not None
    missing, clients = [], []
    try:
        with traced_proxy(
            tmp_path,
            broker.bootstrap_servers,
            routing__rules=str(rules),
            routing__archive_root=str(archive),
            routing__reload_interval_seconds="0",
            server__run_consumers="[]",
        ) as (url, trace):
            for _ in range(EVENTS):
                event = rich_run_event()
                status, client = post_on_own_connection(url, event)
                assert status == 200, status
                clients.append(client)
                reader.stdin.write(event["run"]["runId"] + "\n")
                reader.stdin.flush()
                if reader.stdout.readline().strip() != "1":
                    missing.append(event["run"]["runId"])
    finally:
        reader.stdin.close()
        reader.wait(10)
    assert missing == []
    assert_synced_before_answers(trace.read_text(), clients, ARCHIVE_FILE)
