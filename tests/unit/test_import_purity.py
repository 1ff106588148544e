"""The rule language and the destination configs load without any I/O machinery.

Each import runs in a fresh interpreter, so that what the test suite already loaded does
not hide what the module pulls in. The layer contracts themselves are pyproject.toml's
import-linter contracts (scripts/test.sh runs ``lint-imports``).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import REPO

# An HTTP client, a Kafka client, and what the archive writer and asyncio bring in.
HEAVY = ("aiohttp", "confluent_kafka", "fcntl")


def _loaded_after_import(module: str) -> list[str]:
    probe = f"import sys, {module}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    return done.stdout.split()


@pytest.mark.parametrize(
    "module",
    [
        "routing_rules.matcher",
        "routing_rules.compiler",
        "routing_rules.dry_run",
        "proxy.destinations.kinds",
    ],
)
def test_importing_rules_or_destination_configs_loads_no_http_kafka_or_file_locking(module):
    assert _loaded_after_import(module) == []


def test_the_probe_sees_heavy_modules_when_they_are_loaded():
    # The registry names each kind's runtime and imports it when building, so the probe
    # imports the runtimes themselves.
    runtimes = "proxy.destinations.http.destination, proxy.destinations.kafka.destination"
    assert _loaded_after_import(runtimes) == list(HEAVY)
