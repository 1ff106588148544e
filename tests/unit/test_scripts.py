"""scripts/venv.sh installs only when pyproject.toml (or the extras asked for) changed;
scripts/test.sh runs the whole suite, or with ``--quick`` the quick tier only.

Run for real in a scratch copy whose ``.venv/bin/python`` (and every other tool) records how
it is called, so the test sees exactly which commands the script would run, without
installing or running anything."""

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


RECORDING_TOOL = """#!/bin/sh
echo "$(basename "$0") $*" >> "{calls}"
"""


def _test_sh(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run scripts/test.sh in a scratch copy where every script and tool it calls (venv.sh,
    deploy_tools.sh, kafka.sh, flink.sh, spark_kafka.sh, ruff, mypy, lint-imports, mkdocs,
    python, apt-get) only records how it was called; the result and those calls."""
    project = tmp_path / "project"
    calls = tmp_path / "calls"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "test.sh", project / "scripts" / "test.sh")
    scripts = ("venv", "deploy_tools", "kafka", "flink", "spark_kafka")
    stubs = [project / "scripts" / f"{n}.sh" for n in scripts]
    stubs += [project / ".venv" / "bin" / n for n in ("ruff", "mypy", "lint-imports", "mkdocs")]
    stubs += [project / ".venv" / "bin" / "python", tmp_path / "bin" / "apt-get"]
    for stub in stubs:
        stub.parent.mkdir(parents=True, exist_ok=True)
        stub.write_text(RECORDING_TOOL.format(calls=calls))
        stub.chmod(0o755)
    environ = {k: v for k, v in os.environ.items() if k != "LINEAGE_PROXY_TEST_WORKERS"}
    environ["PATH"] = f"{tmp_path / 'bin'}:{environ['PATH']}"
    done = subprocess.run(
        ["bash", str(project / "scripts" / "test.sh"), *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, calls.read_text().splitlines() if calls.exists() else []


def test_test_sh_runs_the_whole_suite_and_with_quick_the_quick_tier_only(tmp_path):
    done, calls = _test_sh(tmp_path / "whole", "-x")
    assert done.returncode == 0, done.stderr
    assert "kafka.sh fetch" in calls
    assert {"flink.sh python", "flink.sh jars", "spark_kafka.sh "} <= set(calls)
    assert calls[-1] == "python -m pytest -n 3 --dist loadgroup -x"

    done, calls = _test_sh(tmp_path / "quick", "--quick", "-x")
    assert done.returncode == 0, done.stderr
    assert [c.split()[0] for c in calls if not c.startswith("apt-get")] == [
        "venv.sh",
        "deploy_tools.sh",
        "ruff",
        "ruff",
        "mypy",
        "lint-imports",
        "mkdocs",
        "python",
    ]  # no kafka.sh, flink.sh, spark_kafka.sh: no Kafka jars, no PyFlink, no Spark connector
    assert calls[-1] == "python -m pytest -n 6 --dist loadgroup -m not full -x"
    assert not any("chromium" in c or "postgresql" in c for c in calls)


def test_test_sh_help_says_how_and_runs_nothing(tmp_path):
    done, calls = _test_sh(tmp_path, "--help")
    assert done.returncode == 0 and calls == []
    assert done.stdout.startswith("usage: scripts/test.sh [--quick] [PYTEST_ARGUMENTS...]")
    assert "  scripts/test.sh --quick\n" in done.stdout
