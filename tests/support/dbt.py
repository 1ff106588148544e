"""dbt-ol (openlineage-dbt) on dbt-duckdb, run as a user runs it, for the tests that need
a real dbt client: its own venv, the test project and the events it says it sent.

dbt and openlineage-dbt live in their own venv (``dbt-venv`` in the test cache, outside
git, reused by later runs and fresh clones while the pinned specs stay the same): their
dependencies would not fit ours. Two xdist workers may ask for it at once (the dbt tests
and the Marquez comparison), so the install holds a file lock. dbt-ol records what it sends
(tests/support/recording_client.py).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import CACHE, REPO
from tests.support.recording_client import recording_config
from tests.support.tiers import require_full

__all__ = ["DBT_SPECS", "DbtUnavailable", "dbt_bin_dir", "dbt_ol"]

VENV = CACHE / "dbt-venv"
# dbt-core ≥ 1.11 needs a parser wheel its build downloads from GitHub, outside any index.
DBT_SPECS = ["dbt-core>=1.9,<1.11", "dbt-duckdb>=1.9,<1.12", "openlineage-dbt==1.54.0"]
PROJECT = REPO / "tests" / "dbt_project"


class DbtUnavailable(RuntimeError):
    """pip could not install DBT_SPECS; the message holds the end of its output."""


def dbt_bin_dir() -> Path:
    """The venv's bin directory with dbt and dbt-ol, installed once per DBT_SPECS."""
    require_full("dbt (a virtualenv of its own)")
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
    config = recording_config(work, proxy_url)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    return {
        **environ,
        "PATH": f"{bin_dir}{os.pathsep}{environ['PATH']}",
        "OPENLINEAGE_CONFIG": str(config),
        "OPENLINEAGE_NAMESPACE": namespace,
        "DBT_DUCKDB_PATH": str(work / "warehouse.duckdb"),
        "DO_NOT_TRACK": "1",
    }


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
