"""A new destination kind is one folder plus its entry in proxy/destinations/kinds.py.

The test writes a toy kind (``toy``: append each event as a line to a file) into a copy
of the ``proxy`` package — a folder with its model and its runtime, and the entry in the
registry, nothing else — and runs that copy's commands for real: ``rules check`` accepts
a rules file using it, ``rules test`` shows where an event would go, the configuration
reference describes it, and ``serve`` builds it, delivers to it and lists it on the status
page. Seen failing with the dry run's old chain of type checks (an ``AssertionError`` on
any kind it did not name) and without the registry entry (``rules check`` exit 1).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.support.paths import REPO
from tests.support.ports import free_port
from tests.support.processes import stop_process, wait_until_alive
from tests.support.sample_events import run_event
from tests.support.waiting import wait_until

TOY_CONFIG = '''"""A ``toy`` destination: each event as a line appended to a file."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from proxy.destinations.config import DestinationConfigBase, DryRunDefaults
from proxy.destinations.retry_config import RetryConfig


class ToyDestinationConfig(DestinationConfigBase):
    runtime: ClassVar[str] = "proxy.destinations.toy.destination"

    # Destination kind: a toy that appends events to a file.
    kind: Literal["toy"]
    # The file the toy appends to.
    path: str

    def retry_policy(self) -> RetryConfig | None:
        return None

    def dry_run(self, event: dict[str, Any], defaults: DryRunDefaults) -> dict[str, Any]:
        return {"file": self.path}
'''

TOY_RUNTIME = '''"""The ``toy`` destination's runtime."""

from __future__ import annotations

from typing import Any

from proxy.destinations.base import Destination


class ToyDestination(Destination):
    durable = True

    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self.path = path

    async def start(self) -> None:
        pass

    async def deliver(self, event: dict[str, Any], payload: bytes) -> bool | None:
        with open(self.path, "ab") as file:
            file.write(payload + b"\\n")
        return None

    async def ready(self) -> bool:
        return True

    async def close(self) -> None:
        pass


async def build(name: str, config: Any, resources: Any) -> ToyDestination:
    return ToyDestination(name, config.path)
'''

REGISTRY = "proxy/destinations/kinds.py"
LAST_ENTRY = "    HttpDestinationConfig,\n)"


def _with_toy_kind(root: Path, *, registered: bool = True) -> Path:
    """A copy of the proxy package under ``root`` with the toy kind added; returns ``root``."""
    shutil.copytree(REPO / "proxy", root / "proxy", ignore=shutil.ignore_patterns("__pycache__"))
    toy = root / "proxy" / "destinations" / "toy"
    toy.mkdir()
    (toy / "__init__.py").write_text('"""The toy destination kind."""\n')
    (toy / "config.py").write_text(TOY_CONFIG)
    (toy / "destination.py").write_text(TOY_RUNTIME)
    if registered:
        registry = root / REGISTRY
        text = registry.read_text()
        assert LAST_ENTRY in text, "the registry's last entry moved: update this test"
        registry.write_text(
            text.replace(
                LAST_ENTRY, "    HttpDestinationConfig,\n    ToyDestinationConfig,\n)"
            ).replace(
                "from proxy.destinations.object_archive.config",
                "from proxy.destinations.toy.config import ToyDestinationConfig\n"
                "from proxy.destinations.object_archive.config",
            )
        )
    return root


def _environment(package_root: Path) -> dict[str, str]:
    # The copy first on the path; routing_rules and consumers come from the repository.
    return {**os.environ, "PYTHONPATH": f"{package_root}{os.pathsep}{REPO}"}


def _command(package_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # Run from package_root: `python -m` puts the working directory first on the path.
    return subprocess.run(
        [sys.executable, "-m", "proxy", *args],
        cwd=package_root,
        env=_environment(package_root),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def toy_rules(tmp_path: Path) -> tuple[Path, Path]:
    """A rules file sending every event to a toy destination, and the toy's file."""
    delivered = tmp_path / "toy-events.jsonl"
    rules = tmp_path / "toy-rules.yaml"
    rules.write_text(
        "version: 1\n"
        "destinations:\n"
        f"  toy:\n    kind: toy\n    path: {delivered}\n"
        "rules: []\n"
        "default:\n  to: [toy]\n"
    )
    return rules, delivered


def test_rules_check_refuses_the_kind_until_it_is_registered(tmp_path: Path, toy_rules):
    rules, _ = toy_rules
    package_root = _with_toy_kind(tmp_path / "unregistered", registered=False)
    done = _command(package_root, "rules", "check", str(rules))
    assert done.returncode == 1, done.stderr
    assert f"{rules}:3: destinations.toy: Input tag 'toy'" in done.stdout + done.stderr


def test_a_registered_toy_kind_is_checked_dry_run_described_and_served(tmp_path: Path, toy_rules):
    rules, delivered = toy_rules
    package_root = _with_toy_kind(tmp_path / "registered")

    checked = _command(package_root, "rules", "check", str(rules))
    assert checked.returncode == 0, checked.stderr

    event_file = tmp_path / "event.json"
    event_file.write_text(json.dumps(run_event()))
    tested = _command(package_root, "rules", "test", str(rules), str(event_file), "--json")
    assert tested.returncode == 0, tested.stderr
    outcome = json.loads(tested.stdout.splitlines()[0])
    assert outcome["deliveries"] == [{"name": "toy", "kind": "toy", "file": str(delivered)}]

    reference = _command(package_root, "config-reference")
    assert reference.returncode == 0, reference.stderr
    assert "The file the toy appends to." in reference.stdout

    port = free_port()
    environment = {
        **_environment(package_root),
        "LINEAGE_PROXY__SERVER__PORT": str(port),
        "LINEAGE_PROXY__SERVER__RUN_CONSUMERS": "[]",
        "LINEAGE_PROXY__ROUTING__RULES": str(rules),
        "LINEAGE_PROXY__ROUTING__ARCHIVE_ROOT": str(tmp_path / "archive"),
        "LINEAGE_PROXY__KAFKA__SPOOL__DIRECTORY": str(tmp_path / "spool"),
        # Nothing listens there: the toy rules build no Kafka destination.
        "LINEAGE_PROXY__KAFKA__BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}",
    }
    serve = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--config", str(REPO / "config.yaml")],
        cwd=package_root,
        env=environment,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_alive(url, serve)
        event = run_event()
        answer = requests.post(f"{url}/api/v1/lineage", json=event, timeout=10)
        assert answer.status_code == 200, answer.text
        assert json.loads(delivered.read_text())["run"]["runId"] == event["run"]["runId"]
        status = requests.get(f"{url}/api/v1/status", timeout=10).json()
        wait_until(
            lambda: any(
                d["name"] == "toy" and d["delivered"] == 1
                for d in requests.get(f"{url}/api/v1/status", timeout=10).json()["destinations"]
            ),
            30,
            "the status page to list the toy destination with its delivery",
        )
        assert [d["name"] for d in status["destinations"]] == ["toy"]
    finally:
        stop_process(serve)
