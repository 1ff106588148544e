"""Apache Kafka (KRaft) brokers on loopback: the real engine for integration and fault tests.

A :class:`KafkaCluster` is 1 or 3 nodes, each a combined broker+controller JVM with its own
free loopback ports and its log directory under the cluster's base directory, so each
pytest-xdist worker (or developer) can run its own. The jars come from
``scripts/kafka.sh classpath`` — the one place that fetches them with Maven into a cache
outside git. Data stays on disk: a node killed and restarted, or the whole cluster stopped
and started again from the same directory, keeps every acknowledged record.

Faults are done to the real processes: :meth:`KafkaCluster.kill` (SIGKILL),
:meth:`KafkaCluster.pause`/:meth:`KafkaCluster.resume` (SIGSTOP/SIGCONT),
:meth:`KafkaCluster.start_node` after a kill or :meth:`KafkaCluster.stop_node`.

With ``sasl=SaslSslListener(...)`` every node also listens for SASL_SSL clients
(SCRAM-SHA-512 over TLS) on a port of its own, :attr:`KafkaCluster.sasl_bootstrap_servers`;
the SCRAM users are created when the storage is formatted (``--add-scram``), as an operator
bootstraps a secured KRaft cluster. Brokers and controllers talk PLAINTEXT among themselves
and tests may read back through the PLAINTEXT listener.

``python -m tests.support.kafka_cluster start|stop`` is what ``scripts/kafka.sh start|stop``
runs for a developer.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient

from tests.support.paths import REPO
from tests.support.ports import free_port
from tests.support.tiers import require_full

__all__ = ["SCRAM", "KafkaCluster", "KafkaNode", "SaslSslListener", "kafka_classpath"]

# The one SASL mechanism the secured listener offers.
SCRAM = "SCRAM-SHA-512"

# Small heaps: a test cluster holds little, and three JVMs share a 2-core, shared machine.
JVM_OPTIONS = [
    "-Xmx256m",
    "-Xms64m",
    "-XX:+UseSerialGC",
    # C1 only: the brokers start faster and use less CPU; test traffic is small.
    "-XX:TieredStopAtLevel=1",
    "-Xss512k",
    "-Djava.awt.headless=true",
]


def kafka_classpath() -> str:
    """The brokers' classpath, fetched by ``scripts/kafka.sh`` on first use (Maven)."""
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "kafka.sh"), "classpath"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/kafka.sh classpath failed: {done.stderr.strip()}")
    return done.stdout.strip().splitlines()[-1]


def _new_cluster_id() -> str:
    """A KRaft cluster id (16 random bytes, base64url). One that starts with ``-`` is drawn
    again: StorageTool would read it as an option ("--cluster-id: expected one argument"),
    which failed a session's cluster 1 time in 32."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


@dataclass(frozen=True)
class SaslSslListener:
    """A SASL_SSL listener: the brokers' PKCS#12 keystore (certificate and key, made in
    the test by tests/support/certificates.py) and the SCRAM-SHA-512 users, name → password."""

    keystore: Path
    keystore_password: str
    users: dict[str, str]


@dataclass
class KafkaNode:
    """One combined broker+controller: its id, ports and directory."""

    node_id: int
    port: int
    controller_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    # The SASL_SSL listener's port, on a cluster that has one.
    sasl_port: int | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def log_dir(self) -> Path:
        return self.directory / "data"

    @property
    def properties(self) -> Path:
        return self.directory / "server.properties"

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class KafkaCluster:
    """``brokers`` Apache Kafka nodes on 127.0.0.1 with their data under ``directory``.

    The cluster's identity and ports are written to ``directory/cluster.json`` on the first
    start; a cluster built again on the same directory reuses them (restart from disk).
    With 3 nodes, topics get replication factor 3 and ``min.insync.replicas=2`` by default,
    the settings of a production cluster that keeps taking writes with one broker down.
    """

    def __init__(
        self,
        directory: Path,
        brokers: int = 3,
        controllers: int | None = None,
        sasl: SaslSslListener | None = None,
    ) -> None:
        if brokers not in (1, 3):
            raise ValueError("a test cluster has 1 or 3 brokers")
        require_full("Apache Kafka (a JVM)")
        self.directory = directory
        self.sasl = sasl
        state = directory / "cluster.json"
        if state.exists():
            saved = json.loads(state.read_text())
            self.cluster_id: str = saved["cluster_id"]
            self.controllers: int = saved["controllers"]
            self.nodes = [
                KafkaNode(
                    n["node_id"],
                    n["port"],
                    n["controller_port"],
                    directory / n["name"],
                    sasl_port=n.get("sasl_port"),
                )
                for n in saved["nodes"]
            ]
        else:
            self.cluster_id = _new_cluster_id()
            # Nodes 1..controllers also vote in the KRaft quorum (combined broker+controller);
            # the others are brokers only. Default: every node, as in a small production setup.
            self.controllers = brokers if controllers is None else controllers
            self.nodes = [
                KafkaNode(
                    i,
                    free_port(),
                    free_port(),
                    directory / f"node-{i}",
                    sasl_port=free_port() if sasl is not None else None,
                )
                for i in range(1, brokers + 1)
            ]
        self.replication_factor = len(self.nodes)
        self.min_insync_replicas = min(2, self.replication_factor)
        self._classpath: str | None = None

    # --- addresses -------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    @property
    def sasl_bootstrap_servers(self) -> str:
        """The SASL_SSL listeners' addresses (a cluster started with ``sasl``)."""
        if self.sasl is None:
            raise RuntimeError("this cluster has no SASL_SSL listener")
        return ",".join(f"127.0.0.1:{node.sasl_port}" for node in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no node {node_id}")

    def pid(self, node_id: int) -> int | None:
        return self.node(node_id).pid

    # --- lifecycle -------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> KafkaCluster:
        """Format what is new, start every node, return once all brokers are registered."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._save()
        for node in self.nodes:
            self._write_config(node)
        formatting = [self._format(node) for node in self.nodes if not self._formatted(node)]
        for process in formatting:
            if process.wait() != 0:
                raise RuntimeError(f"kafka storage format failed (see {self.directory})")
        for node in self.nodes:
            self._launch(node)
        self.wait_for_brokers(len(self.nodes), timeout)
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """A clean stop of every node (SIGTERM, controlled shutdown); SIGKILL after
        ``timeout``. The data stays: ``start()`` again comes back with it."""
        for node in self.nodes:
            self._signal(node, signal.SIGCONT)
            self._signal(node, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            self._reap(node, max(0.1, deadline - time.monotonic()))

    def kill_all(self) -> None:
        """SIGKILL every node: a fast end for a test session (the data is thrown away)."""
        for node in self.nodes:
            self._signal(node, signal.SIGCONT)
            self._signal(node, signal.SIGKILL)
            self._reap(node, 30)

    def kill(self, node_id: int) -> None:
        """SIGKILL one node (a crash: no controlled shutdown, no flush)."""
        node = self.node(node_id)
        self._signal(node, signal.SIGKILL)
        self._reap(node, 30)

    def stop_node(self, node_id: int, timeout: float = 60.0) -> None:
        node = self.node(node_id)
        self._signal(node, signal.SIGTERM)
        self._reap(node, timeout)

    def pause(self, node_id: int) -> None:
        self._signal(self.node(node_id), signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        self._signal(self.node(node_id), signal.SIGCONT)

    def start_node(self, node_id: int, timeout: float = 120.0) -> None:
        """Start a node that was killed or stopped; return once its broker is registered
        with the cluster again."""
        node = self.node(node_id)
        if node.running():
            raise RuntimeError(f"node {node_id} is running")
        self._launch(node)
        self.wait_for_brokers(1, timeout, node_id)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what the cluster says ---------------------------------------------------------

    def registered_brokers(self, timeout: float = 5.0) -> set[int]:
        """Broker ids in the cluster metadata as a client sees it (fenced ones are gone)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        return set(admin.list_topics(timeout=timeout).brokers)

    def wait_for_brokers(self, count: int, timeout: float, node_id: int | None = None) -> None:
        """Until ``count`` brokers are registered (and ``node_id`` among them)."""
        deadline = time.monotonic() + timeout
        seen: set[int] = set()
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.process is not None and node.process.poll() is not None:
                    raise RuntimeError(
                        f"kafka node {node.node_id} exited with {node.process.returncode}: "
                        f"{self._tail(node)}"
                    )
            listening = [n for n in self.nodes if n.running() and _listening(n.port)]
            if listening:
                with contextlib.suppress(Exception):
                    seen = self.registered_brokers()
                    if len(seen) >= count and (node_id is None or node_id in seen):
                        return
            time.sleep(0.2)
        raise TimeoutError(f"kafka: {len(seen)} of {count} brokers registered after {timeout}s")

    def leader_of(self, topic: str, partition: int = 0, timeout: float = 10.0) -> int:
        """The node id leading ``topic``'s ``partition`` now."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        metadata = admin.list_topics(topic, timeout=timeout)
        return int(metadata.topics[topic].partitions[partition].leader)

    def active_controller(self) -> int | None:
        """The node id leading the KRaft quorum, from the running nodes' ``quorum-state``
        files (the metadata log's own record of the elected leader; clients cannot ask
        for it): the newest epoch's leader, None while an election is under way."""
        newest: tuple[int, int] | None = None
        for node in self.nodes:
            state = node.log_dir / "__cluster_metadata-0" / "quorum-state"
            if node.running() and state.exists():
                with contextlib.suppress(ValueError, OSError):  # being rewritten
                    saved = json.loads(state.read_text())
                    epoch_leader = (int(saved["leaderEpoch"]), int(saved["leaderId"]))
                    newest = max(newest or epoch_leader, epoch_leader)
        return None if newest is None or newest[1] < 0 else newest[1]

    def rss_bytes(self) -> dict[int, int]:
        """Resident memory of each running node (from /proc)."""
        sizes = {}
        for node in self.nodes:
            if node.pid is not None and node.running():
                for line in Path(f"/proc/{node.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        sizes[node.node_id] = int(line.split()[1]) * 1024
        return sizes

    # --- internals ---------------------------------------------------------------------

    def _save(self) -> None:
        state = {
            "cluster_id": self.cluster_id,
            "controllers": self.controllers,
            "nodes": [
                {
                    "node_id": n.node_id,
                    "port": n.port,
                    "controller_port": n.controller_port,
                    "sasl_port": n.sasl_port,
                    "name": n.directory.name,
                }
                for n in self.nodes
            ],
        }
        (self.directory / "cluster.json").write_text(json.dumps(state, indent=1))

    def _write_config(self, node: KafkaNode) -> None:
        node.directory.mkdir(parents=True, exist_ok=True)
        voters = ",".join(
            f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes[: self.controllers]
        )
        voting = node.node_id <= self.controllers
        listeners = f"PLAINTEXT://127.0.0.1:{node.port}"
        advertised = f"PLAINTEXT://127.0.0.1:{node.port}"
        protocols = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        if node.sasl_port is not None:
            listeners += f",SASL_SSL://127.0.0.1:{node.sasl_port}"
            advertised += f",SASL_SSL://127.0.0.1:{node.sasl_port}"
            protocols += ",SASL_SSL:SASL_SSL"
        if voting:
            listeners += f",CONTROLLER://127.0.0.1:{node.controller_port}"
        rf = self.replication_factor
        settings = {
            "process.roles": "broker,controller" if voting else "broker",
            "node.id": node.node_id,
            "controller.quorum.voters": voters,
            "listeners": listeners,
            "advertised.listeners": advertised,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": protocols,
            "log.dirs": node.log_dir,
            "num.partitions": 3,
            "default.replication.factor": rf,
            "min.insync.replicas": self.min_insync_replicas,
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": 10,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": self.min_insync_replicas,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": self.min_insync_replicas,
            # Tests start consumer groups all the time: no 3 s wait for more members.
            "group.initial.rebalance.delay.ms": 0,
            # The suite's consumers use 3 s session timeouts (a quick rebalance on a kill).
            "group.min.session.timeout.ms": 1000,
            "num.io.threads": 2,
            "num.network.threads": 2,
            "num.recovery.threads.per.data.dir": 1,
            "log.cleaner.threads": 1,
            "log.cleaner.dedupe.buffer.size": 4 * 1024 * 1024,
            "transaction.state.log.num.partitions": 5,
            **self._sasl_settings(),
        }
        node.properties.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        (node.directory / "log4j2.properties").write_text(
            "status = warn\n"
            "appender.file.type = File\n"
            "appender.file.name = file\n"
            f"appender.file.fileName = {node.directory / 'server.log'}\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\n"
            "rootLogger.appenderRef.file.ref = file\n"
        )

    def _sasl_settings(self) -> dict[str, object]:
        """The SASL_SSL listener's settings: SCRAM-SHA-512 only, the keystore, no client
        certificates (the password is what authenticates)."""
        if self.sasl is None:
            return {}
        scram = SCRAM.lower()
        return {
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": SCRAM,
            f"listener.name.sasl_ssl.{scram}.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "listener.name.sasl_ssl.ssl.keystore.type": "PKCS12",
            "listener.name.sasl_ssl.ssl.keystore.location": self.sasl.keystore,
            "listener.name.sasl_ssl.ssl.keystore.password": self.sasl.keystore_password,
            "listener.name.sasl_ssl.ssl.key.password": self.sasl.keystore_password,
            "listener.name.sasl_ssl.ssl.client.auth": "none",
        }

    def _java(self, node: KafkaNode, main: str, *args: str) -> list[str]:
        if self._classpath is None:
            self._classpath = kafka_classpath()
        return [
            "java",
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={node.directory / 'log4j2.properties'}",
            "-cp",
            self._classpath,
            main,
            *args,
        ]

    def _formatted(self, node: KafkaNode) -> bool:
        return (node.log_dir / "meta.properties").exists()

    def _format(self, node: KafkaNode) -> subprocess.Popen[bytes]:
        users = self.sasl.users if self.sasl is not None else {}
        scram = [
            arg
            for name, password in users.items()
            for arg in ("--add-scram", f"{SCRAM}=[name={name},password={password}]")
        ]
        command = self._java(
            node, "kafka.tools.StorageTool", "format", "-t", self.cluster_id,
            "-c", str(node.properties), *scram,
        )  # fmt: skip
        with (node.directory / "format.log").open("ab") as out:
            return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=out)

    def _launch(self, node: KafkaNode) -> None:
        command = self._java(node, "kafka.Kafka", str(node.properties))
        with (node.directory / "stdout.log").open("ab") as out:
            # Its own session: a Ctrl-C meant for pytest does not reach the brokers first.
            node.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        (node.directory / "pid").write_text(str(node.process.pid))

    def _signal(self, node: KafkaNode, sig: signal.Signals) -> None:
        if node.process is not None and node.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(node.process.pid, sig)

    def _reap(self, node: KafkaNode, timeout: float) -> None:
        if node.process is None:
            return
        try:
            node.process.wait(timeout)
        except subprocess.TimeoutExpired:
            node.process.kill()
            node.process.wait()
        node.process = None
        with contextlib.suppress(FileNotFoundError):
            (node.directory / "pid").unlink()

    def _tail(self, node: KafkaNode) -> str:
        for name in ("stdout.log", "server.log"):
            path = node.directory / name
            if path.exists() and path.stat().st_size:
                return " | ".join(path.read_text(errors="replace").splitlines()[-5:])
        return "(no output)"


def shared_cluster(directory: Path) -> KafkaCluster:
    """The 3-broker cluster in ``directory`` that several processes share (the xdist
    workers of one test run): the first caller starts it, the others wait on the lock and
    attach to it (same ports, no process handles). Whoever made ``directory`` stops it,
    with :func:`stop_detached`, once every sharer is done."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cluster = KafkaCluster(directory, brokers=3)
        if not (directory / "started").exists():
            cluster.start()
            (directory / "started").touch()
        return cluster


def stop_detached(directory: Path, sig: signal.Signals = signal.SIGTERM) -> None:
    """Stop nodes started by ``start`` in another process (their pid files): SIGTERM for a
    clean stop (SIGKILL after a minute), or ``sig=SIGKILL`` when the data goes anyway."""
    pids = []
    for pid_file in sorted(directory.glob("node-*/pid")):
        pid = int(pid_file.read_text())
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, sig)
            pids.append(pid)
        pid_file.unlink()
    deadline = time.monotonic() + 60
    for pid in pids:
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/kafka.sh")
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--brokers", type=int, default=3, choices=[1, 3])
    parser.add_argument("--directory", type=Path, default=Path("var/kafka"))
    args = parser.parse_args(argv)
    directory = args.directory.resolve()
    if args.action == "stop":
        stop_detached(directory)
        return 0
    if any(directory.glob("node-*/pid")):
        print(f"kafka: already started in {directory} (scripts/kafka.sh stop)", file=sys.stderr)
        return 1
    began = time.monotonic()
    cluster = KafkaCluster(directory, args.brokers).start()
    # The nodes run on in their own sessions after this process exits.
    print(
        json.dumps(
            {
                "bootstrap_servers": cluster.bootstrap_servers,
                "directory": str(directory),
                "seconds_to_start": round(time.monotonic() - began, 1),
                "rss_mib": {k: v // 2**20 for k, v in cluster.rss_bytes().items()},
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
