"""Fixtures shared by the whole suite: one real Kafka cluster per session (per
pytest-xdist worker: each worker is a session of its own, with its own ports and
directories from tests/support/), proxies on loopback; the xdist groups that keep
heavy tests together; the fault figures printed at the end, gathered from every worker."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase

from proxy.server.serve import listener_tls, serving
from proxy.web.app import create_app
from tests.support import tiers
from tests.support.browser import chromium
from tests.support.consumers import create_topic
from tests.support.dbt import DbtUnavailable, dbt_bin_dir
from tests.support.figures import FIGURES_DIRECTORY, recorded
from tests.support.kafka_cluster import KafkaCluster, shared_cluster, stop_detached
from tests.support.paths import ARCHIVE_ROOT, SPOOL_ROOT
from tests.support.proxies import proxy_config
from tests.support.tiers import starts

# Where the run's shared Kafka cluster lives; the controlling process names it and its
# xdist workers inherit the name through the environment.
SHARED_KAFKA_DIRECTORY = "LINEAGE_PROXY_TEST_KAFKA"

# Tests that share one expensive thing run on one xdist worker (``--dist loadgroup``):
# dbt builds a project once per module, the Flink tests run one job for the module.
# Spark tests: see _spark_group.
XDIST_GROUPS = {"tests/integration/test_dbt.py": "dbt", "tests/flink/": "flink"}
SPARK_HANG_GUARD_SECONDS = 1200


def _spark_group(item: pytest.Item) -> str | None:
    """The xdist group of a Spark test: those on the worker's in-process SparkSession
    together (a second session would be a second JVM); the others run their jobs in
    processes of their own, so only a module's tests stay together (its module-scoped
    fixture runs the jobs once) and the modules spread over the workers."""
    if not item.nodeid.startswith("tests/spark/"):
        return None
    if "spark_session" in getattr(item, "fixturenames", ()):
        return "spark"
    return "spark-" + item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")


# Hypothesis searches afresh on every run (no derandomize outside the reproducible fuzz
# tests) and keeps the failures it found in the temporary directory, where CI's next run
# on the machine replays them first; a fresh clone's working tree keeps nothing.
settings.register_profile(
    "suite",
    database=DirectoryBasedExampleDatabase(
        Path(tempfile.gettempdir()) / "lineage-proxy-hypothesis"
    ),
)
settings.load_profile("suite")


@pytest.fixture(scope="session", autouse=True)
def _remove_test_archive() -> Iterator[None]:
    yield
    shutil.rmtree(ARCHIVE_ROOT, ignore_errors=True)
    shutil.rmtree(SPOOL_ROOT, ignore_errors=True)


@pytest.fixture(autouse=True)
def _own_emitter_buffer(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test's Spark processes buffer undelivered events in a directory of their own:
    in the shared default (``~/.cache/spark_emitter/buffer``) one test's leftovers are
    sent by the next test's emitter at its start, into that test's lineage."""
    monkeypatch.setenv("OPENLINEAGE_SPARK_BUFFER_DIR", str(tmp_path_factory.mktemp("buffer")))


@pytest.fixture(scope="session")
@starts("Apache Kafka (a JVM)")
def broker() -> KafkaCluster:
    """Apache Kafka for the whole test run: 3 KRaft brokers on loopback, topics with
    replication factor 3 and ``min.insync.replicas=2``, shared by every xdist worker (the
    first to ask starts it; tests never share a topic). Nine broker JVMs, three per worker,
    cost the 2-core machine more than the tests they served. Faults that harm a cluster
    use a private one. The quick start's embedded broker (Tansu) keeps its own smoke test
    (test_cli.py)."""
    return shared_cluster(Path(os.environ[SHARED_KAFKA_DIRECTORY]))


@pytest.fixture(scope="session")
@starts("dbt (a virtualenv of its own, installed on first use)")
def dbt_bin() -> Path:
    """The bin directory of the dbt venv (dbt, dbt-ol), installed on first use; a test
    that needs dbt fails, never skips, when it cannot be installed."""
    try:
        return dbt_bin_dir()
    except DbtUnavailable as error:
        pytest.fail(str(error))


@pytest.fixture
@starts("Chromium")
def browser() -> Callable[..., Awaitable[bytes]]:
    """``await browser(url, profile, *args)``: headless Chromium's stdout on ``url``
    (``chromium`` in tests/support/browser.py)."""
    return chromium


@pytest.fixture
def topic() -> str:
    """A fresh topic name per test so tests never read each other's events."""
    return f"test.{uuid.uuid4().hex[:12]}"


@pytest.fixture
def topic_with(broker: KafkaCluster, topic: str) -> Callable[[int], str]:
    """``topic_with(n)``: the test's topic, created with ``n`` partitions."""

    def make(partitions: int) -> str:
        create_topic(broker.bootstrap_servers, topic, partitions)
        return topic

    return make


ProxyFactory = Callable[..., Any]


@pytest.fixture
def start_proxy_on(topic: str) -> ProxyFactory:
    """``async with start_proxy_on(bootstrap, **sections) as url:`` — a real proxy on a
    loopback port, served exactly as ``lineage-proxy serve`` serves it, on the broker the
    test chose (a Tansu, an address where nothing listens): no Apache Kafka, so the test
    stays in the quick tier (``server={"tls": ...}`` serves https)."""

    @asynccontextmanager
    async def start(bootstrap: str, **sections: dict[str, Any]) -> AsyncIterator[str]:
        sections["server"] = {"host": "127.0.0.1", "port": 0, **sections.get("server", {})}
        config = proxy_config(bootstrap, topic, **sections)
        async with serving(create_app(config), listener_tls(config)) as port:
            yield f"{'https' if config.server.tls else 'http'}://127.0.0.1:{port}"

    return start


@pytest.fixture
def start_proxy(broker: KafkaCluster, start_proxy_on: ProxyFactory) -> ProxyFactory:
    """``async with start_proxy(**sections) as url:`` — :func:`start_proxy_on` on the
    session's Apache Kafka cluster (``bootstrap=`` another broker; a test on that one
    alone takes ``start_proxy_on`` and needs no cluster)."""

    def start(bootstrap: str | None = None, **sections: dict[str, Any]) -> Any:
        return start_proxy_on(bootstrap or broker.bootstrap_servers, **sections)

    return start


# The JVMs the tests start (Spark drivers and the official jar's jobs, Marquez, S3Proxy)
# run small jobs for seconds to minutes, where the C2 compiler and the parallel collector
# cost more CPU than they save: the C1 compiler only and the serial collector cut the Spark
# JVMs' CPU by 43 % on tests/spark/test_official_jar.py (80.6 → 45.6 CPU-seconds,
# scripts/cpu_profile.py), and the suite is CPU-bound on 2 cores (docs/contributing/test-suite.md).
# The `java` launcher reads JDK_JAVA_OPTIONS; flags on a command line (the Kafka brokers')
# come after it and win. Not a production setting: nothing under test depends on the JIT.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def pytest_configure(config: pytest.Config) -> None:
    """Every test process gives the JVMs it starts TEST_JVM_OPTIONS (unless the caller
    chose other options). The controlling process (or the only one) makes the figures
    directory; xdist workers, started later, inherit its name through the environment.
    The tiers' hooks (tests/support/tiers.py) mark ``full`` the tests that need a JVM, dbt,
    PostgreSQL or Chromium."""
    config.pluginmanager.register(tiers, "lineage-proxy-tiers")
    os.environ.setdefault("JDK_JAVA_OPTIONS", TEST_JVM_OPTIONS)
    if not hasattr(config, "workerinput"):
        os.environ[FIGURES_DIRECTORY] = tempfile.mkdtemp(prefix="lineage-proxy-test-figures-")
        os.environ[SHARED_KAFKA_DIRECTORY] = tempfile.mkdtemp(prefix="lineage-proxy-test-kafka-")


def pytest_unconfigure(config: pytest.Config) -> None:
    """The controlling process, after every worker finished, stops the shared cluster.
    No clean stop is under test here: SIGKILL is quick and the data is thrown away."""
    if not hasattr(config, "workerinput") and SHARED_KAFKA_DIRECTORY in os.environ:
        directory = Path(os.environ.pop(SHARED_KAFKA_DIRECTORY))
        stop_detached(directory, signal.SIGKILL)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of each of XDIST_GROUPS with its xdist group, and on an xdist worker
    give every test of a group the ``@group`` suffix that ``--dist loadgroup`` schedules by.

    pytest-xdist 3.8 adds that suffix by assigning ``item._nodeid``, which pytest 9 no
    longer reads (a node's id lives in ``_id``): its groups silently did nothing and every
    worker started its own SparkSession and Marquez. Done here, last, when the suffix is
    missing."""
    for item in items:
        for prefix, group in XDIST_GROUPS.items():
            if item.nodeid.startswith(prefix):
                item.add_marker(pytest.mark.xdist_group(group))
        if (spark := _spark_group(item)) is not None:
            item.add_marker(pytest.mark.xdist_group(spark))
            # A hang guard, not a time limit: Spark jobs in JVMs of their own take minutes
            # when the 2-core machine is busy, past the suite's default of 5.
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(SPARK_HANG_GUARD_SECONDS))
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    for item in items:
        groups = sorted(
            {
                str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                for m in item.iter_markers("xdist_group")
            }
        )
        if groups and "@" not in item.nodeid:
            node_id = f"{item.nodeid}@{'_'.join(groups)}"
            item._id = type(item._id).parse(node_id)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Print every fault test's figures (tests/support/figures.py), from every worker."""
    if hasattr(config, "workerinput"):
        return
    directory = Path(os.environ[FIGURES_DIRECTORY])
    lines = recorded(directory)
    shutil.rmtree(directory, ignore_errors=True)
    if not lines:
        return
    terminalreporter.section("fault figures")
    for line in lines:
        terminalreporter.write_line(line)
