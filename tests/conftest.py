"""Fixtures shared by the whole suite: one real Kafka cluster per session, proxies on loopback."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from proxy.app import create_app
from proxy.config import ProxyConfig, load_config
from proxy.serve import listener_tls, serving
from tests.support.kafka_cluster import KafkaCluster

REPO = Path(__file__).resolve().parents[1]
# The official OpenLineage spec (JSON Schemas and examples), the oracle of the validator
# tests: next to the repository, or wherever OPENLINEAGE_SPEC_DIR says.
SPEC_DIR = Path(
    os.environ.get("OPENLINEAGE_SPEC_DIR") or REPO.parent / "shared" / "openlineage-spec"
)
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
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Apache Kafka for the whole test session (of each xdist worker): 3 KRaft brokers on
    loopback, topics with replication factor 3 and ``min.insync.replicas=2``. The quick
    start's embedded broker (Tansu) keeps its own smoke test (test_cli.py)."""
    directory = tmp_path_factory.mktemp("kafka")
    cluster = KafkaCluster(directory, brokers=3).start()
    try:
        yield cluster
    finally:
        # No clean stop is under test here: SIGKILL is quick and the data is thrown away.
        cluster.kill_all()
        shutil.rmtree(directory, ignore_errors=True)


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
def start_proxy(request: pytest.FixtureRequest, topic: str) -> ProxyFactory:
    """``async with start_proxy(**sections) as url:`` — a real proxy on a loopback port,
    served exactly as ``lineage-proxy serve`` serves it (``bootstrap=`` points it at
    another broker than the session's, and then the session's cluster is not started for
    it; ``server={"tls": ...}`` serves https)."""

    @asynccontextmanager
    async def start(bootstrap: str | None = None, **sections: dict[str, Any]) -> AsyncIterator[str]:
        sections["server"] = {"host": "127.0.0.1", "port": 0, **sections.get("server", {})}
        if bootstrap is None:
            session_broker: KafkaCluster = request.getfixturevalue("broker")
            bootstrap = session_broker.bootstrap_servers
        config = proxy_config(bootstrap, topic, **sections)
        async with serving(create_app(config), listener_tls(config)) as port:
            yield f"{'https' if config.server.tls else 'http'}://127.0.0.1:{port}"

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
