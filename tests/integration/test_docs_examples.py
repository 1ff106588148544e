"""The docs' examples that need a running proxy: the quick start's curl is run as written
against a real proxy, and the generated reference pages are what a started proxy makes now."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import orjson

from proxy.cli.docs_reference import pages
from tests.support.paths import REPO


def _quick_start_curl() -> str:
    text = (REPO / "docs" / "get-started" / "quick-start.md").read_text()
    block = re.search(r"```bash\n(export OPENLINEAGE_URL=.*?)```", text, re.S)
    assert block, "the quick start's curl block is gone"
    # Run what the user pastes, less the `ls` of the consumer's output (another test's job).
    return "\n".join(line for line in block[1].splitlines() if not line.startswith("ls "))


async def test_the_quick_start_curl_is_accepted(start_proxy):
    script = _quick_start_curl()
    async with start_proxy() as url:
        # The user's shell exports the URL; ours overrides it to the test proxy's.
        script = script.replace("http://127.0.0.1:5000", url, 1)
        process = await asyncio.create_subprocess_exec(
            "bash", "-c", script, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await process.communicate()
    assert process.returncode == 0
    assert orjson.loads(out) == {"status": "success"}


async def test_the_generated_reference_pages_are_current(broker, tmp_path: Path):
    made = await pages(broker.bootstrap_servers, tmp_path)
    for name, text in made.items():
        committed = (REPO / "docs" / "reference" / name).read_text()
        assert committed == text, f"docs/reference/{name} is stale: run scripts/config_docs.sh"
