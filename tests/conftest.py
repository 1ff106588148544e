"""Fixtures shared by the whole suite: one real broker per session, proxies on loopback."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from proxy.app import create_app, server_options
from proxy.config import ProxyConfig, load_config
from proxy.embedded_broker import EmbeddedBroker

REPO = Path(__file__).resolve().parents[1]
SPEC_DIR = REPO.parent / "shared" / "openlineage-spec"
# Where proxies started by tests archive events unless a test names its own directory.
ARCHIVE_ROOT = Path(tempfile.mkdtemp(prefix="lineage-proxy-test-archive-"))
# Each proxy a test starts spools (Kafka outage) into a directory of its own under this.
SPOOL_ROOT = Path(tempfile.mkdtemp(prefix="lineage-proxy-test-spool-"))


def fresh_spool_directory() -> Path:
    return Path(tempfile.mkdtemp(dir=SPOOL_ROOT))


@pytest.fixture(scope="session", autouse=True)
def _remove_test_archive() -> Iterator[None]:
    yield
    shutil.rmtree(ARCHIVE_ROOT, ignore_errors=True)
    shutil.rmtree(SPOOL_ROOT, ignore_errors=True)


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    """A real Kafka-protocol broker (Tansu) for the whole test session."""
    with EmbeddedBroker() as running:
        yield running


@pytest.fixture
def topic() -> str:
    """A fresh topic name per test so tests never read each other's events."""
    return f"test.{uuid.uuid4().hex[:12]}"


def proxy_config(bootstrap: str, topic: str, **sections: dict[str, Any]) -> ProxyConfig:
    """The default config.yaml, pointed at ``bootstrap``/``topic``, with section overrides."""
    base = load_config(REPO / "config.yaml", environ={})
    data = base.model_dump()
    data["kafka"].update(bootstrap_servers=bootstrap, topic=topic)
    data["routing"]["archive_root"] = ARCHIVE_ROOT
    data["kafka"]["spool"]["directory"] = fresh_spool_directory()
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    return ProxyConfig.model_validate(data)


ProxyFactory = Callable[..., Any]


@pytest.fixture
def start_proxy(broker: EmbeddedBroker, topic: str) -> ProxyFactory:
    """``async with start_proxy(**sections) as url:`` — a real proxy on a loopback port
    (``bootstrap=`` points it at another broker than the session's)."""

    @asynccontextmanager
    async def start(bootstrap: str | None = None, **sections: dict[str, Any]) -> AsyncIterator[str]:
        config = proxy_config(bootstrap or broker.bootstrap_servers, topic, **sections)
        server = TestServer(create_app(config), host="127.0.0.1")
        await server.start_server(**server_options(config))
        try:
            yield str(server.make_url("")).rstrip("/")
        finally:
            await server.close()

    return start


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print every fault test's figures (tests/faults/figures.py) at the end of the run."""
    from tests.faults.figures import RECORDED

    if not RECORDED:
        return
    import json

    terminalreporter.section("fault figures")
    for record in RECORDED:
        terminalreporter.write_line(json.dumps(record, default=str))
