"""Everything that talks to Kafka, through a SASL_SSL listener (SCRAM-SHA-512 over TLS)
of a real Apache Kafka broker: ``serve``, its spool drain, the consumer daemons (archive,
HTTP target, Kafka republisher) and their dead-letter producer, ``dlq``, ``replay
--to-topic`` and ``tap`` — with the security settings from config.yaml and from the
environment — and a wrong password that leaves the proxy not ready, and a consumer daemon
unhealthy, each with one clear line.

The Marquez, Egeria and DataHub consumers read Kafka with the same source
(consumers/kafka_source.py) and deliver through the same HTTP destination as the ``http``
consumer here, so they are covered by its path rather than started again.

One private 1-broker cluster for the module (the session's clusters have no SASL
listener; a second listener there would cost every worker a keystore and SCRAM users
for the few tests that need them). Its certificate comes from the tests' CA
(tests/support/certificates.py), its SCRAM user is created when its storage is formatted. What
the clients wrote is read back through the broker's PLAINTEXT listener — an independent
reader, not the code under test.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import yaml
from confluent_kafka import KafkaException

from tests.support.certificates import TestCA
from tests.support.cli import run_cli
from tests.support.consumers import FAST_BREAKER, FAST_RETRY, TEST_GROUP
from tests.support.doubles.target_double import TargetDouble
from tests.support.kafka_cluster import SCRAM, KafkaCluster, SaslSslListener
from tests.support.kafka_reader import Record, read_topic
from tests.support.metrics import sample
from tests.support.paths import REPO
from tests.support.ports import free_port
from tests.support.processes import ServeProcess, stop_process, wait_until_ready
from tests.support.sample_events import run_event
from tests.support.tiers import starts
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

USER = "lineage"
PASSWORD = "scram-pass-1b7e"
PASSWORD_VARIABLE = "TEST_KAFKA_SASL_PASSWORD"


@dataclass(frozen=True)
class Secured:
    cluster: KafkaCluster
    ca: Path

    @property
    def bootstrap(self) -> str:
        """The SASL_SSL listener: what every client under test is pointed at."""
        return self.cluster.sasl_bootstrap_servers

    @property
    def plaintext(self) -> str:
        """The broker's PLAINTEXT listener: for reading back, independently."""
        return self.cluster.bootstrap_servers

    def security(self, **password: str) -> dict[str, str]:
        """``kafka.producer``'s security keys as docs/routing/kafka.md shows them, for this
        cluster's user and CA; ``password``: ``sasl_password=`` or ``sasl_password_env=``."""
        documented = {k: str(v) for k, v in _documented_producer().items()}
        documented.pop("sasl.password_env")
        return {
            **documented,
            "sasl.username": USER,
            "ssl.ca.location": str(self.ca),
            **{key.replace("_", ".", 1): value for key, value in password.items()},
        }


def _documented_producer() -> dict[str, Any]:
    """``kafka.producer`` of the config.yaml snippet in the guide's security section."""
    page = (REPO / "docs" / "routing" / "kafka.md").read_text()
    section = page.split("## Security", 1)[1]
    snippet = section.split('```yaml title="config.yaml"\n', 1)[1].split("```", 1)[0]
    producer: dict[str, Any] = yaml.safe_load(snippet)["kafka"]["producer"]
    assert producer["security.protocol"] == "SASL_SSL" and producer["sasl.mechanisms"] == SCRAM
    return producer


@pytest.fixture(scope="module")
@starts("Apache Kafka with a SASL_SSL listener (a JVM)")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    directory = tmp_path_factory.mktemp("sasl")
    ca = TestCA(directory)
    keystore_password = "keystore-pass"
    keystore = ca.issue_keystore("broker", keystore_password)
    listener = SaslSslListener(keystore, keystore_password, {USER: PASSWORD})
    cluster = KafkaCluster(directory / "kafka", brokers=1, sasl=listener).start()
    try:
        yield Secured(cluster, ca.cert)
    finally:
        cluster.kill_all()
        shutil.rmtree(directory, ignore_errors=True)


def _write_config(
    path: Path, secured: Secured, topic: str, *, security: Mapping[str, str] | None, **more: Any
) -> Path:
    """A config.yaml for the secured cluster; ``security`` goes to ``kafka.producer``
    (None: the environment gives it)."""
    base = path.parent
    kafka: dict[str, Any] = {
        "bootstrap_servers": secured.bootstrap,
        "topic": topic,
        "spool": {"directory": str(base / "spool")},
    }
    if security is not None:
        kafka["producer"] = dict(security)
    config = {
        "server": {"host": "127.0.0.1", "port": free_port()},
        "kafka": kafka,
        "routing": {"archive_root": str(base / "archive")},
        **more,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def _env_security(secured: Secured) -> dict[str, str]:
    """The security settings as ``LINEAGE_PROXY__KAFKA__PRODUCER__<key>`` variables, the
    password itself behind one more variable (``sasl.password_env``)."""
    settings = secured.security(sasl_password_env=PASSWORD_VARIABLE)
    return {f"LINEAGE_PROXY__KAFKA__PRODUCER__{k.upper()}": v for k, v in settings.items()}


@contextlib.contextmanager
def _process(command: list[str], env: Mapping[str, str]) -> Iterator[ServeProcess]:
    """``lineage-proxy COMMAND`` as a real process (stderr kept in a file); SIGTERM at
    the end."""
    fd, log_name = tempfile.mkstemp(prefix="lineage-proxy-sasl-", suffix=".log")
    try:
        process = ServeProcess(
            [sys.executable, "-m", "proxy", *command],
            cwd=REPO,
            env={**os.environ, **env},
            stdout=subprocess.PIPE if command[0] == "tap" else subprocess.DEVNULL,
            stderr=fd,
            text=True,
        )
    finally:
        os.close(fd)
    process.log_path = Path(log_name)
    try:
        yield process
    finally:
        stop_process(process)
        process.log_path.unlink(missing_ok=True)


def _url(config: Path) -> str:
    return f"http://127.0.0.1:{yaml.safe_load(config.read_text())['server']['port']}"


async def _post(url: str, events: list[dict[str, Any]]) -> list[int]:
    async with aiohttp.ClientSession() as session:
        statuses = []
        for event in events:
            async with session.post(f"{url}/api/v1/lineage", json=event) as resp:
                statuses.append(resp.status)
        return statuses


async def _get(url: str, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(f"{url}{path}") as resp:
        return resp.status, await resp.text()


async def _landed(bootstrap: str, topic: str, expect: int) -> list[Record]:
    """The records of ``topic`` once it holds ``expect`` (a topic a client under test
    creates may not exist yet when asked: "not yet")."""
    found: list[Record] = []

    def enough() -> bool:
        nonlocal found
        found = read_topic(bootstrap, topic, expect=expect, timeout=5)
        return len(found) >= expect

    await wait_for(
        lambda: asyncio.to_thread(enough),
        60,
        f"{expect} records in {topic}",
        ignoring=KafkaException,
    )
    return found


def _run_ids(records: list[Record]) -> list[str]:
    return [orjson.loads(r.value)["run"]["runId"] for r in records]


@contextlib.asynccontextmanager
async def _target() -> AsyncIterator[TargetDouble]:
    target = await TargetDouble().start()
    try:
        yield target
    finally:
        await target.stop()


async def test_serve_tap_consumers_dead_letters_dlq_and_replay_through_sasl_ssl_from_config_yaml(
    secured: Secured, topic: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(PASSWORD_VARIABLE, PASSWORD)
    events = [run_event(name=f"job-{i}") for i in range(6)]
    async with _target() as target:
        consumed = tmp_path / "consumed"
        group = {"group": TEST_GROUP, "commit_interval_seconds": 0.2}
        consumers = {
            "archive": {"target": {"kind": "archive", "directory": str(consumed)}, **group},
            "http": {
                "target": {"kind": "http", "url": target.url + target.path, "retry": FAST_RETRY},
                "circuit_breaker": FAST_BREAKER,
                **group,
            },
            "copy": {"target": {"kind": "kafka", "topic": f"{topic}.copy"}, **group},
        }
        security = secured.security(sasl_password_env=PASSWORD_VARIABLE)
        config = _write_config(
            tmp_path / "config.yaml", secured, topic, security=security, consumers=consumers
        )
        url = _url(config)
        with _process(["serve", "--config", str(config)], {}) as proxy:
            await asyncio.to_thread(wait_until_ready, url, proxy)
            with _process(["tap", "--url", url, "--limit", "2", "--format", "json"], {}) as tap:
                await wait_for(
                    lambda: _tap_subscribers(url), what="the tap to subscribe", alive=tap
                )
                assert await _post(url, events[:2]) == [200, 200]
                tapped, _ = await asyncio.to_thread(tap.communicate, timeout=60)
            assert tap.returncode == 0, tap.log()
            assert await _post(url, events[2:]) == [200] * 4
        # The tap shows events only once Kafka confirmed them: through SASL_SSL.
        shown = [orjson.loads(line)["event"]["run"]["runId"] for line in tapped.splitlines()]
        assert shown == [e["run"]["runId"] for e in events[:2]]
        landed = await _landed(secured.plaintext, topic, 6)
        assert sorted(_run_ids(landed)) == sorted(e["run"]["runId"] for e in events)

        # The HTTP target refuses the first event for good: it goes to the dead letters.
        target.fail_next(1, status=400, body=b'{"error": "refused by the test"}')
        with _process(["consume", "--all", "--config", str(config)], {}) as daemons:
            await wait_for(
                lambda: len(target.events) == 5 and _archived(consumed) == 6,
                60,
                "the archive and the http target to get every event",
                alive=daemons,
            )
            copied = await _landed(secured.plaintext, f"{topic}.copy", 6)
            dead = await _landed(secured.plaintext, f"{topic}.dlq", 1)
    assert sorted(_run_ids(copied)) == sorted(e["run"]["runId"] for e in events)
    assert len(dead) == 1

    code, out, err = await run_cli("dlq", "list", "--format", "json", "--config", str(config))
    assert code == 0, err
    [listed] = [orjson.loads(line) for line in out.splitlines()]
    assert listed["consumer"] == "http", listed
    code, _, err = await run_cli(
        "dlq", "redrive", "--all", "--to-topic", f"{topic}.redriven", "--create-topic",
        "--config", str(config),
    )  # fmt: skip
    assert code == 0, err
    redriven = await _landed(secured.plaintext, f"{topic}.redriven", 1)
    assert _run_ids(redriven) == _run_ids(dead)

    code, _, err = await run_cli(
        "replay", "--archive", str(consumed), "--to-topic", f"{topic}.replayed",
        "--create-topic", "--config", str(config),
    )  # fmt: skip
    assert code == 0, err
    replayed = await _landed(secured.plaintext, f"{topic}.replayed", 6)
    assert sorted(_run_ids(replayed)) == sorted(e["run"]["runId"] for e in events)


async def _tap_subscribers(url: str) -> bool:
    _, text = await _get(url, "/metrics")
    return (sample(text, "lineage_proxy_tap_subscribers") or 0) >= 1


def _archived(directory: Path) -> int:
    lines = 0
    for path in directory.rglob("*.jsonl*"):
        lines += len(path.read_bytes().splitlines())
    return lines


async def test_spooled_events_drain_through_sasl_ssl_with_settings_from_the_environment(
    secured: Secured, topic: str, tmp_path: Path
):
    """Events acknowledged while the broker cannot be reached wait in the spool; a proxy
    given the SASL settings only by environment variables drains them."""
    config = _write_config(tmp_path / "config.yaml", secured, topic, security=None)
    env = {**_env_security(secured), PASSWORD_VARIABLE: PASSWORD}
    url = _url(config)
    events = await _spooled_by_a_proxy_that_cannot_reach_kafka(config, env, 30)
    with _process(["serve", "--config", str(config)], env) as proxy:
        await asyncio.to_thread(wait_until_ready, url, proxy)
        await wait_for(lambda: _spool_empty(url), 60, "the spool to drain", alive=proxy)
    landed = await _landed(secured.plaintext, topic, 30)
    assert sorted(_run_ids(landed)) == sorted(e["run"]["runId"] for e in events)


async def test_spool_drain_command_sends_a_left_spool_through_sasl_ssl(
    secured: Secured, topic: str, tmp_path: Path
):
    """A spool left by a proxy that never reached Kafka, drained by ``lineage-proxy spool
    drain`` with the security settings of config.yaml: every event lands, exit 0."""
    config = _write_config(
        tmp_path / "config.yaml", secured, topic, security=secured.security(sasl_password=PASSWORD)
    )
    events = await _spooled_by_a_proxy_that_cannot_reach_kafka(config, {}, 20)
    code, out, err = await run_cli("spool", "drain", "--config", str(config))
    assert code == 0, err
    assert f"20 of 20 events sent to Kafka at {secured.bootstrap}" in out
    landed = await _landed(secured.plaintext, topic, 20)
    assert sorted(_run_ids(landed)) == sorted(e["run"]["runId"] for e in events)


async def _spooled_by_a_proxy_that_cannot_reach_kafka(
    config: Path, env: Mapping[str, str], count: int
) -> list[dict[str, Any]]:
    """``count`` events acknowledged (fsynced to the spool) by ``serve --config config``
    pointed at an address where no broker listens, then stopped: the spool it leaves."""
    unreachable = {**env, "LINEAGE_PROXY__KAFKA__BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}"}
    url = _url(config)
    events = [run_event(name=f"job-{i % 3}") for i in range(count)]
    with _process(["serve", "--config", str(config)], unreachable) as proxy:
        await wait_for(lambda: _answers(url), what="the proxy to listen", alive=proxy)
        assert await _post(url, events) == [200] * count
        assert sample((await _get(url, "/metrics"))[1], "lineage_proxy_spool_events") == count
    return events


async def _answers(url: str) -> bool:
    try:
        status, _ = await _get(url, "/healthz")
    except aiohttp.ClientError:
        return False
    return status == 200


async def _spool_empty(url: str) -> bool:
    _, text = await _get(url, "/metrics")
    return sample(text, "lineage_proxy_spool_events") == 0


async def test_wrong_password_is_one_clear_line_and_a_proxy_that_is_not_ready(
    secured: Secured, topic: str, tmp_path: Path
):
    config = _write_config(
        tmp_path / "config.yaml", secured, topic, security=secured.security(sasl_password="wrong")
    )
    url = _url(config)
    with _process(["serve", "--config", str(config)], {}) as proxy:
        await wait_for(lambda: _answers(url), what="the proxy to listen", alive=proxy)
        # The marker: librdkafka has tried (and been refused) many times by now.
        await wait_for(lambda: _refusals(url, 10), 60, "10 refused authentications", alive=proxy)
        status, body = await _get(url, "/readyz")
        problems = orjson.loads(body).get("problems", [])
        _, page = await _get(url, "/api/v1/status")
        assert proxy.poll() is None, "the proxy exited"
        log = proxy.log()
    assert status == 503, body
    assert any("authentication" in p.lower() and secured.bootstrap in p for p in problems), problems
    assert any("sasl.username" in p for p in problems), problems
    assert "authentication" in page.lower() and "sasl.password" in page
    said = [line for line in log.splitlines() if re.search("authenticat", line, re.I)]
    assert len(said) == 1, log
    assert secured.bootstrap in said[0] and "sasl.password" in said[0], said[0]


async def _refusals(url: str, at_least: int) -> bool:
    _, text = await _get(url, "/metrics")
    return (sample(text, "lineage_proxy_kafka_connection_failures_total") or 0) >= at_least


def _failed_authentications(cluster: KafkaCluster) -> int:
    """How many SASL handshakes the broker has refused so far, from its own log — a
    witness that is not the client under test."""
    return sum(
        (node.directory / "server.log").read_text(errors="replace").count("Failed authentication")
        for node in cluster.nodes
    )


async def test_consumer_with_a_wrong_password_from_the_environment_says_so_once_and_stays_up(
    secured: Secured, topic: str, tmp_path: Path
):
    """A consumer daemon given its SASL settings only by environment variables, with the
    wrong password: /healthz names the refused authentication and what to check, the log
    says it once, and the daemon neither exits nor floods while the broker keeps refusing."""
    port = free_port()
    consumers = {
        "archive": {
            "target": {"kind": "archive", "directory": str(tmp_path / "consumed")},
            "group": TEST_GROUP,
            "status_port": port,
        }
    }
    config = _write_config(
        tmp_path / "config.yaml", secured, topic, security=None, consumers=consumers
    )
    env = {**_env_security(secured), PASSWORD_VARIABLE: "wrong"}
    before = _failed_authentications(secured.cluster)
    with _process(["consume", "archive", "--config", str(config)], env) as daemon:
        # The marker: the broker itself has refused this daemon ten times by now.
        await wait_for(
            lambda: _failed_authentications(secured.cluster) >= before + 10,
            90,
            "the broker to refuse 10 authentications",
            alive=daemon,
        )
        status, body = await _get(f"http://127.0.0.1:{port}", "/healthz")
        assert daemon.poll() is None, "the consumer exited"
        log = daemon.log()
    assert status == 503, body
    assert "authentication" in body.lower() and "sasl.password" in body, body
    said = [line for line in log.splitlines() if re.search("authenticat", line, re.I)]
    assert len(said) == 1, log
    assert secured.bootstrap in said[0] and "sasl.password" in said[0], said[0]
