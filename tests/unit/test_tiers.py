"""The tiers (tests/support/tiers.py): a test is ``full`` through a fixture declared with
``starts`` (however deep), a marker of FULL_MARKERS or by hand; ``-m "not full"`` (the
quick tier) leaves those out; and a test of the quick tier that starts what only the full
tier has fails, saying how to fix it, in either run. Checked on a suite of its own, in a
pytest of its own, with the plugin registered as tests/conftest.py registers it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

CONFTEST = """
import pytest

from tests.support import tiers
from tests.support.tiers import require_full, starts


def pytest_configure(config):
    config.pluginmanager.register(tiers, "lineage-proxy-tiers")


@pytest.fixture(scope="session")
@starts("a JVM")
def jvm():
    require_full("a JVM")


@pytest.fixture
def through_jvm(jvm):
    return "deeper"
"""

TESTS = """
import pytest

from tests.support.tiers import require_full


def test_plain():
    pass


def test_through_a_fixture(through_jvm):
    pass


@pytest.mark.spark
def test_spark_marker():
    pass


@pytest.mark.full
def test_marked_by_hand():
    require_full("a JVM")


def test_starts_in_its_body():
    require_full("a JVM")
"""

INI = """
[pytest]
markers =
    spark: PySpark
    full: the full tier
"""


def _pytest(suite: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    # Only the tiers' plugin (hypothesis, xdist… would only slow its start).
    env.update(PYTHONPATH=str(REPO), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", *args],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_quick_tier_leaves_out_what_a_fixture_or_marker_needs_and_fails_the_rest(
    tmp_path: Path,
):
    (tmp_path / "pytest.ini").write_text(INI)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_sample.py").write_text(TESTS)

    quick = _pytest(tmp_path, "-m", "not full")
    assert quick.returncode == 1, quick.stdout
    assert "1 failed, 1 passed, 3 deselected" in quick.stdout
    assert "PASSED test_sample.py::test_plain" in quick.stdout
    assert (
        "test_sample.py::test_starts_in_its_body starts a JVM, which only the full tier "
        "has, but is not marked `full`: declare the fixture that starts it with "
        "@starts(...), or mark the test @pytest.mark.full"
    ) in quick.stdout

    # The whole suite fails it too: CI catches the test nobody ran quick.
    whole = _pytest(tmp_path)
    assert whole.returncode == 1, whole.stdout
    assert "1 failed, 4 passed" in whole.stdout
