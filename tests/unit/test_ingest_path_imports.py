"""The ingest path (validate → authorize → route → deliver) and auth load no HTTP server.

The import contracts of pyproject.toml cannot name ``aiohttp.web`` (a subpackage of an
external package), so a fresh interpreter imports each module and lists what it loaded.
Seen failing before auth's request handling moved to proxy/web/principal.py: importing
``proxy.ingest.pipeline`` loaded ``aiohttp.web_request`` and others through
its token checks (now :mod:`proxy.auth`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import REPO


@pytest.mark.parametrize(
    "module",
    [
        "proxy.ingest.pipeline",
        "proxy.ingest.live_rules",
        "proxy.auth.authenticator",
        "proxy.tap.hub",
        "proxy.support.request_errors",
    ],
)
def test_importing_it_loads_no_aiohttp_web(module: str):
    listed = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys, {module}; "
            "print(' '.join(m for m in sys.modules if m.startswith('aiohttp.web')))",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
        timeout=60,
    )
    assert listed.stdout.split() == []
