"""Headless Chromium, which the status page is tested in (the ``browser`` fixture of
tests/conftest.py: a Debian package scripts/test.sh installs for the full tier)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from tests.support.tiers import require_full

__all__ = ["chromium"]

CHROMIUM = "chromium"


async def chromium(url: str, profile: Path, *args: str) -> bytes:
    """Run headless Chromium on ``url`` with ``args``; its stdout. Asynchronous, so the
    proxy serving the page runs on while the browser loads it."""
    require_full("Chromium")
    binary = shutil.which(CHROMIUM)
    if binary is None:
        pytest.fail(
            "chromium is not installed: scripts/test.sh installs it as root "
            "(apt-get install chromium); the status page is tested in a real browser"
        )
    process = await asyncio.create_subprocess_exec(
        binary,
        *("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"),
        *("--disable-background-networking", "--disable-component-update", "--disable-sync"),
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        # Virtual time runs the page's script (first poll, rendering) without real waiting.
        "--virtual-time-budget=8000",
        *args,
        url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode(errors="replace")[-2000:]
    return out
