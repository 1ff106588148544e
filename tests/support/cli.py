"""``lineage-proxy`` commands run in a thread of the test process: a new interpreter per
call costs seconds on a busy machine, and the CLI's ``main`` is what the console script
runs."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging

from proxy.cli import main

__all__ = ["run_cli"]


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
