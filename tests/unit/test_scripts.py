"""scripts/venv.sh installs only when pyproject.toml (or the extras asked for) changed.

Run for real in a scratch copy whose ``.venv/bin/python`` records how it is called, so the
test sees exactly which pip commands the script would run, without installing anything."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support.paths import REPO

RECORDING_PYTHON = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/../../calls"
"""


def _project(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "venv.sh", tmp_path / "scripts" / "venv.sh")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(RECORDING_PYTHON)
    python.chmod(0o755)
    return tmp_path


def _install(project: Path, *extras: str, **env: str) -> list[str]:
    """Run venv.sh; the pip commands it ran this time."""
    calls = project / "calls"
    calls.unlink(missing_ok=True)
    environ = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SPEC", "FORCE_INSTALL")}
    subprocess.run(
        ["bash", str(project / "scripts" / "venv.sh"), *extras],
        check=True,
        env={**environ, **env},
        capture_output=True,
        timeout=60,
    )
    return calls.read_text().splitlines() if calls.exists() else []


def test_second_start_skips_pip_until_pyproject_changes(tmp_path):
    project = _project(tmp_path)
    assert _install(project) == ["-m pip install --quiet --disable-pip-version-check -e ."]
    assert _install(project) == []
    with (project / "pyproject.toml").open("a") as f:
        f.write("\n# a new dependency, say\n")
    assert len(_install(project)) == 1
    assert _install(project) == []


def test_each_set_of_extras_and_pyspark_pin_is_installed_once(tmp_path):
    project = _project(tmp_path)
    assert _install(project, "dev") == [
        "-m pip install --quiet --disable-pip-version-check -e .[dev]"
    ]
    assert len(_install(project, "dev,spark")) == 1
    assert _install(project, "dev") == []
    pinned = _install(project, "dev,spark", PYSPARK_SPEC="==3.5.*")
    assert pinned[-1].endswith("pyspark==3.5.*")
    assert _install(project, "dev,spark", PYSPARK_SPEC="==3.5.*") == []
    assert len(_install(project, "dev", FORCE_INSTALL="1")) == 1
