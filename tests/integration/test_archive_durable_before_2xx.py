"""A 2xx from the proxy means the event's line is already in an archive file: another
process, reading the files (in-progress ones too), finds it right after each answer."""

from __future__ import annotations

import asyncio
import sys
from asyncio.subprocess import PIPE
from pathlib import Path

import aiohttp
import orjson
import pytest

from tests.sample_events import rich_run_event

pytestmark = pytest.mark.integration

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


async def test_each_2xx_line_is_readable_by_another_process_right_away(start_proxy, tmp_path: Path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    archive = tmp_path / "archive"
    reader = await asyncio.create_subprocess_exec(
        sys.executable, "-c", READER, str(archive), stdin=PIPE, stdout=PIPE
    )
    stdin, stdout = reader.stdin, reader.stdout
    assert stdin is not None and stdout is not None

    async def found(run_id: str) -> bool:
        stdin.write(run_id.encode() + b"\n")
        await stdin.drain()
        return (await stdout.readline()).strip() == b"1"

    missing = []
    try:
        routing = {"rules": rules, "archive_root": archive, "reload_interval_seconds": 0}
        async with start_proxy(routing=routing) as url, aiohttp.ClientSession() as session:
            for _ in range(30):
                event = rich_run_event()
                async with session.post(f"{url}/api/v1/lineage", data=orjson.dumps(event)) as r:
                    assert r.status == 200
                if not await found(event["run"]["runId"]):
                    missing.append(event["run"]["runId"])
    finally:
        stdin.close()
        await asyncio.wait_for(reader.wait(), 10)
    assert missing == []
