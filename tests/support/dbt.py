"""dbt-ol (openlineage-dbt) on dbt-duckdb, run as a user runs it, for the tests that need
a real dbt client: its own venv, the test project and the events it says it sent.

dbt and openlineage-dbt live in their own venv (``dbt-venv`` in the test cache, outside
git, reused by later runs and fresh clones while the pinned specs stay the same): their
dependencies would not fit ours. Two xdist workers may ask for it at once (the dbt tests
and the Marquez comparison), so the install holds a file lock. dbt-ol sends each event both
to the proxy and to a file (the client's composite transport): the file is the independent
list of everything the client emitted.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import yaml

from tests.support.paths import CACHE, REPO

__all__ = ["DBT_SPECS", "DbtUnavailable", "dbt_bin_dir", "dbt_ol", "sent_events"]

VENV = CACHE / "dbt-venv"
# dbt-core ≥ 1.11 needs a parser wheel its build downloads from GitHub, outside any index.
DBT_SPECS = ["dbt-core>=1.9,<1.11", "dbt-duckdb>=1.9,<1.12", "openlineage-dbt==1.54.0"]
PROJECT = REPO / "tests" / "dbt_project"


class DbtUnavailable(RuntimeError):
    """pip could not install DBT_SPECS; the message holds the end of its output."""


def dbt_bin_dir() -> Path:
    """The venv's bin directory with dbt and dbt-ol, installed once per DBT_SPECS."""
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with (VENV.parent / ".dbt-venv.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = VENV / ".installed"
        if not stamp.is_file() or stamp.read_text() != "\n".join(DBT_SPECS):
            shutil.rmtree(VENV, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
            pip = subprocess.run(
                [str(VENV / "bin" / "pip"), "install", "-q", *DBT_SPECS],
                capture_output=True,
                text=True,
                timeout=600,
            )
            if pip.returncode != 0:
                raise DbtUnavailable(f"could not install {DBT_SPECS}:\n{pip.stderr[-3000:]}")
            stamp.write_text("\n".join(DBT_SPECS))
    return VENV / "bin"


def _environment(bin_dir: Path, work: Path, proxy_url: str, namespace: str) -> dict[str, str]:
    """dbt-ol configured as a user would: an OpenLineage config file and environment."""
    config = {
        "transport": {
            "type": "composite",
            "continue_on_success": True,
            "continue_on_failure": True,
            "transports": {
                "proxy": {"type": "http", "url": proxy_url},
                "file": {"type": "file", "log_file_path": str(work / "sent.jsonl"), "append": True},
            },
        }
    }
    (work / "openlineage.yml").write_text(yaml.safe_dump(config))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    return {
        **environ,
        "PATH": f"{bin_dir}{os.pathsep}{environ['PATH']}",
        "OPENLINEAGE_CONFIG": str(work / "openlineage.yml"),
        "OPENLINEAGE_NAMESPACE": namespace,
        "DBT_DUCKDB_PATH": str(work / "warehouse.duckdb"),
        "DO_NOT_TRACK": "1",
    }


def sent_events(work: Path) -> list[dict[str, Any]]:
    """What the client in ``work`` emitted, in order (its file transport's record)."""
    path = work / "sent.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


async def dbt_ol(
    bin_dir: Path, work: Path, proxy_url: str, *args: str, namespace: str = "dbt-tests"
) -> asyncio.subprocess.Process:
    """``dbt-ol <args>`` on a copy of the test project in ``work``, sending to
    ``proxy_url``; its output goes to ``work/dbt-ol.log``."""
    project = work / "project"
    if not project.exists():
        shutil.copytree(PROJECT, project)
    return await asyncio.create_subprocess_exec(
        str(bin_dir / "dbt-ol"),
        "--consume-structured-logs",
        *args,
        "--project-dir",
        str(project),
        "--profiles-dir",
        str(project),
        env=_environment(bin_dir, work, proxy_url, namespace),
        stdout=(work / "dbt-ol.log").open("ab"),
        stderr=subprocess.STDOUT,
    )
