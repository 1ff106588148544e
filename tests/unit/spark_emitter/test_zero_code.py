"""Turning lineage on by configuration: what the job is told when nothing is configured,
the ``instrument`` wrapper's ``PYTHONPATH``, and the hook in a real Python process with
PySpark imported as ``spark-submit`` imports it (from ``pyspark.zip``), no JVM started.
The hook on real unmodified PySpark jobs, ``spark-submit`` included, is
tests/spark/test_zero_code.py."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyspark
import pytest

from spark_emitter.autoload import DIRECTORY
from spark_emitter.enable import NOTHING_CONFIGURED, enable_lineage
from spark_emitter.instrument import pythonpath
from tests.support.paths import REPO


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
    env = {**os.environ, "PYTHONPATH": pythonpath(os.pathsep.join([str(tmp_path), str(REPO)]))}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "1", "True"]


# What a probe prints when the hook did its work: PySpark imported from where the test
# said, ``getOrCreate`` wrapped, the other sitecustomize run.
_PROBE = (
    "import builtins, inspect, sys\n"
    "from pyspark.sql import SparkSession\n"
    "import pyspark, pyspark.sql.session as session\n"
    "print(pyspark.__file__)\n"
    "print(getattr(SparkSession.Builder, '_openlineage_autoload', False))\n"
    "print(getattr(builtins, 'OTHER_SITE', 0))\n"
    "print('def getOrCreate' in inspect.getsource(session))\n"
)


def _probe(python_path: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env={**os.environ, "PYTHONPATH": python_path},
        cwd=REPO.parent,  # not the repository: only the path given imports spark_emitter
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Error in sitecustomize" not in done.stderr, done.stderr[-3000:]
    return done.stdout.split()


def _other_sitecustomize(folder: Path) -> Path:
    """A sitecustomize of the environment's own, which ours must still let run."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text("import builtins\nbuiltins.OTHER_SITE = 1\n")
    return folder


@pytest.fixture(scope="module")
def pyspark_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The installed PySpark's modules zipped as Spark distributions ship them
    (``$SPARK_HOME/python/lib/pyspark.zip``, which ``spark-submit`` puts on the driver's
    ``PYTHONPATH``; its data files too, e.g. ``errors/error-conditions.json``): every
    module of it is loaded by one shared ``zipimporter``."""
    package = Path(pyspark.__file__).parent
    skipped = {"jars", "python", "bin", "sbin", "examples", "data", "licenses"}
    archive = tmp_path_factory.mktemp("spark-python-lib") / "pyspark.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zipped:
        for source in sorted(package.rglob("*")):
            inside = source.relative_to(package)
            if source.is_file() and inside.parts[0] not in skipped and source.suffix != ".pyc":
                zipped.write(source, str(Path("pyspark") / inside))
    return archive


def test_the_hook_works_on_pyspark_imported_from_pyspark_zip(
    pyspark_zip: Path, tmp_path: Path
) -> None:
    """Issue 38: under ``spark-submit`` (and with ``PYTHONPATH=$(... --pythonpath)`` beside
    ``pyspark.zip``) every job crashed with ``AttributeError: partially initialized module
    'pyspark.sql.conf' has no attribute 'SparkSession'``: the hook replaced the shared
    zipimporter's ``exec_module`` and so ran on every later PySpark module. Failed so on
    the old code; the source of the patched module is still readable through its loader."""
    other = _other_sitecustomize(tmp_path / "site")
    path = pythonpath(os.pathsep.join([str(pyspark_zip), str(other), str(REPO)]))
    assert _probe(path) == [
        str(pyspark_zip / "pyspark" / "__init__.py"),
        "True",
        "1",
        "True",
    ]


def test_two_copies_of_spark_emitter_on_the_path_do_not_recurse(tmp_path: Path) -> None:
    """Issue 38: with the autoload folder of one copy of spark_emitter on the path and the
    package imported from another (a checkout beside an installed copy), the hook took the
    other copy's folder off the path and found its own sitecustomize again, forever
    (``Error in sitecustomize ... RecursionError`` on the old code). Both copies'
    folders on the path: each runs once, then the environment's own sitecustomize."""
    copy = tmp_path / "copy"
    shutil.copytree(
        REPO / "spark_emitter", copy / "spark_emitter", ignore=shutil.ignore_patterns("__pycache__")
    )
    other = _other_sitecustomize(tmp_path / "site")
    for first in (
        [copy / "spark_emitter" / "autoload"],
        [copy / "spark_emitter" / "autoload", DIRECTORY],
    ):
        path = os.pathsep.join([*map(str, first), str(other), str(REPO)])
        assert _probe(path)[1:] == ["True", "1", "True"]
