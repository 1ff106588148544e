"""The emitter ships to a Spark cluster on its own (``spark-submit --py-files``): it must
import nothing from the proxy, the routing rules or the consumers, nor their dependencies.

Both tests import every module of ``spark_emitter`` in a fresh interpreter, so nothing
already imported by the test run can hide a dependency.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support.paths import REPO

# Imports every spark_emitter module with the project's other packages and the proxy's
# third-party dependencies made unimportable; prints what it imported.
IMPORT_EVERYTHING = """
import importlib, pkgutil, sys

BLOCKED = {"proxy", "routing_rules", "consumers", "orjson", "pydantic", "aiohttp",
           "confluent_kafka", "yaml", "jsonschema_rs", "prometheus_client"}

class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"the emitter imported {name}")
        return None

sys.meta_path.insert(0, Blocker())
import spark_emitter
names = ["spark_emitter"] + [
    m.name for m in pkgutil.walk_packages(spark_emitter.__path__, "spark_emitter.")
]
for name in names:
    importlib.import_module(name)
leaked = sorted(n for n in sys.modules if n.split(".")[0] in BLOCKED)
assert not leaked, leaked
print("\\n".join(names))
"""


def _imported_modules(code: str, *flags: str, cwd: Path) -> set[str]:
    """Run ``code`` in a fresh interpreter; the module names it printed."""
    completed = subprocess.run(
        [sys.executable, *flags, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return set(completed.stdout.split())


def _modules_in_source() -> set[str]:
    package = REPO / "spark_emitter"
    return {
        ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for path in package.rglob("*.py")
    }


def test_every_emitter_module_imports_with_the_proxy_and_its_dependencies_blocked() -> None:
    # Run from the repository: the proxy is importable, only the blocker stops it.
    assert _imported_modules(IMPORT_EVERYTHING, cwd=REPO) == _modules_in_source()


def test_a_zip_of_just_the_emitter_imports_with_no_site_packages(tmp_path: Path) -> None:
    """What ``--py-files spark_emitter.zip`` gives a cluster: the package and nothing else
    (``-S``: no site-packages, so not even PySpark; ``-I``: no environment, no cwd)."""
    archive = tmp_path / "spark_emitter.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in (REPO / "spark_emitter").rglob("*.py"):
            zipped.write(path, path.relative_to(REPO).as_posix())
    code = f"import sys; sys.path.insert(0, {str(archive)!r}); exec({IMPORT_EVERYTHING!r})"
    assert _imported_modules(code, "-S", "-I", cwd=tmp_path) == _modules_in_source()
