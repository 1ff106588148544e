"""``lineage-proxy serve`` as a real process, as users run it, for signal and crash tests.

stderr goes to a file, never a pipe: a proxy that logs under load would block on a full
pipe nobody reads, and a test would blame the proxy for a hang it caused itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import requests

from tests.support.paths import ARCHIVE_ROOT, REPO, fresh_spool_directory
from tests.support.ports import free_port
from tests.support.waiting import wait_until

__all__ = ["ServeProcess", "serve_process", "wait_until_alive", "wait_until_ready"]


class ServeProcess(subprocess.Popen):
    """A ``Popen`` whose stderr is kept in a file; :meth:`log` reads it so far."""

    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def wait_until_ready(
    url: str, process: subprocess.Popen[str], timeout: float = 90, verify: str | bool = True
) -> None:
    """Until ``url``/readyz answers 200 (``verify``: the CA file for an https URL); the
    process exiting fails the wait at once, with its log. The deadline bounds a hang on a
    loaded machine (a start under load can take tens of seconds); it is not a check."""
    wait_until(
        lambda: requests.get(f"{url}/readyz", timeout=5, verify=verify).status_code == 200,
        timeout,
        f"{url}/readyz to answer 200",
        alive=process,
        ignoring=requests.RequestException,
    )


def wait_until_alive(url: str, process: subprocess.Popen[str], timeout: float = 60) -> None:
    """Until ``url``/healthz answers 2xx: alive is enough where /readyz says "not ready"
    (Kafka unreachable, on purpose). Like :func:`wait_until_ready` otherwise."""
    wait_until(
        lambda: requests.get(f"{url}/healthz", timeout=5).ok,
        timeout,
        f"{url}/healthz to answer",
        alive=process,
        ignoring=requests.RequestException,
    )


def serve_process(
    broker_address: str,
    *args: str,
    port: int | None = None,
    under: Sequence[str] = (),
    **settings: str,
) -> tuple[ServeProcess, str]:
    """``lineage-proxy serve --config config.yaml`` on a free port (or ``port``), with
    ``settings`` as ``LINEAGE_PROXY__*`` overrides (``kafka__topic="x"``) and extra CLI
    ``args``; returns the process and its URL (https when ``server__tls__*`` is set).
    ``under`` is a command the proxy runs under (``strace … --``)."""
    port = port or free_port()
    env = {
        **os.environ,
        "LINEAGE_PROXY__SERVER__PORT": str(port),
        "LINEAGE_PROXY__KAFKA__BOOTSTRAP_SERVERS": broker_address,
        "LINEAGE_PROXY__ROUTING__ARCHIVE_ROOT": str(ARCHIVE_ROOT),
        "LINEAGE_PROXY__KAFKA__SPOOL__DIRECTORY": str(fresh_spool_directory()),
        "LINEAGE_PROXY__CONSUMERS__ARCHIVE__TARGET__DIRECTORY": str(ARCHIVE_ROOT / "consumed"),
        # One consumer group per topic: a group shared with an earlier test's process
        # (gone, or reading another topic) makes this one wait through rebalances.
        "LINEAGE_PROXY__CONSUMERS__ARCHIVE__GROUP_ID": "lineage-proxy.archive."
        + settings.get("kafka__topic", "openlineage.events"),
        **{f"LINEAGE_PROXY__{key.upper()}": value for key, value in settings.items()},
    }
    fd, log_name = tempfile.mkstemp(prefix="lineage-proxy-serve-", suffix=".log")
    try:
        process = ServeProcess(
            [*under, sys.executable, "-m", "proxy", "serve", "--config", "config.yaml", *args],
            cwd=REPO,
            env=env,
            stderr=fd,
            text=True,
        )
    finally:
        os.close(fd)
    process.log_path = Path(log_name)
    scheme = "https" if any(key.startswith("server__tls__") for key in settings) else "http"
    return process, f"{scheme}://127.0.0.1:{port}"


def stop_process(process: subprocess.Popen[Any], timeout: float = 30) -> None:
    """SIGTERM ``process`` if it still runs and wait for it; SIGKILL after ``timeout``
    (a clean stop that hangs must not hang the suite)."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
