"""``lineage-proxy`` commands for tests: in a thread of the test process (a new
interpreter per call costs seconds on a busy machine, and the CLI's ``main`` is what the
console script runs), or as a process of its own where the process is what is tested
(exit codes, stderr, a reader that leaves)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import subprocess
import sys
from typing import Any

from proxy.cli.main import main
from tests.support.paths import REPO

__all__ = ["cli_process", "run_cli"]


def cli_process(
    *args: str, env: dict[str, str] | None = None, **kw: Any
) -> subprocess.CompletedProcess[str]:
    """``python -m proxy ARGS`` run to its end from the repository, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "proxy", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        timeout=60,
        **kw,
    )


async def run_cli(*args: str) -> tuple[int, str, str]:
    """``lineage-proxy ARGS``: (exit code, stdout, stderr). The root logger's handlers and
    level are put back afterwards (the CLI sets up logging anew)."""

    def run() -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        root = logging.getLogger()
        handlers, level = root.handlers[:], root.level
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(list(args))
        finally:
            root.handlers[:] = handlers
            root.setLevel(level)
        return code, out.getvalue(), err.getvalue()

    return await asyncio.to_thread(run)
