"""Turning lineage on by configuration: what the job is told when nothing is configured,
and the ``instrument`` wrapper's ``PYTHONPATH``. The hook itself, on a real unmodified
PySpark job, is tests/spark/test_zero_code.py."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from spark_emitter.autoload import DIRECTORY
from spark_emitter.enable import NOTHING_CONFIGURED, enable_lineage
from spark_emitter.instrument import pythonpath


class SessionWithEmptyConf:
    """A SparkSession double that only answers ``sparkContext.getConf().getAll()`` — all
    ``enable_lineage`` reads before it finds there is no transport (no JVM needed)."""

    def __init__(self) -> None:
        conf = SimpleNamespace(getAll=lambda: [])
        self.sparkContext = SimpleNamespace(getConf=lambda: conf)


def _nothing_configured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [n for n in os.environ if n.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no openlineage.yml here
    monkeypatch.setenv("HOME", str(tmp_path))


def test_with_nothing_configured_the_job_is_told_it_emits_no_lineage(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _nothing_configured(monkeypatch, tmp_path)
    caplog.set_level(logging.INFO)
    session: Any = SessionWithEmptyConf()
    assert enable_lineage(session) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [NOTHING_CONFIGURED]
    assert "NO lineage" in NOTHING_CONFIGURED and "OPENLINEAGE_URL" in NOTHING_CONFIGURED
    # openlineage-python's own "will print events to console" would contradict it.
    assert not [r for r in caplog.records if "console" in r.getMessage()]


def test_the_wrapper_puts_the_autoload_folder_first_once() -> None:
    assert pythonpath(None) == str(DIRECTORY)
    assert pythonpath(f"/a{os.pathsep}{DIRECTORY}{os.pathsep}/b") == os.pathsep.join(
        [str(DIRECTORY), "/a", "/b"]
    )
    assert (DIRECTORY / "sitecustomize.py").is_file()


def test_the_hook_patches_sparksession_only_when_pyspark_is_imported(tmp_path: Path) -> None:
    """A process with the hook that never imports PySpark does not pay for it; one that
    does gets a wrapped ``getOrCreate``; an existing sitecustomize still runs."""
    (tmp_path / "sitecustomize.py").write_text("import builtins\nbuiltins.OTHER_SITE = 1\n")
    probe = (
        "import sys, builtins\n"
        "print('pyspark' in sys.modules, getattr(builtins, 'OTHER_SITE', 0))\n"
        "from pyspark.sql import SparkSession\n"
        "print(getattr(SparkSession.Builder, '_openlineage_autoload', False))\n"
    )
    env = {**os.environ, "PYTHONPATH": pythonpath(str(tmp_path))}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "1", "True"]
