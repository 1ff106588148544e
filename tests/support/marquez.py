"""A real Marquez API server on PostgreSQL, private to one test process (one xdist worker).

The one place that knows how Marquez is obtained, configured, started and stopped; the
developer script ``scripts/marquez.sh`` calls this module's command line.

Obtaining it (:func:`ensure_marquez`), into ``$LINEAGE_PROXY_CACHE/marquez-0.50.0/lib``
(default cache ``~/.cache/lineage-proxy``), outside git, reused on the next run:

1. Maven Central: ``io.github.marquezproject:marquez-api:0.50.0`` with its runtime
   dependencies (``mvn dependency:copy-dependencies``).
2. When Central does not serve it — the case on this project's machines, where neither the
   pom nor the jar of any ``marquez-api`` version is served — from Marquez's own sources at
   tag ``0.50.0``, compiled with Maven against the same dependencies as its Gradle build
   declares (every one of them *is* on Central), the jar and its dependencies laid out
   exactly as in 1. The sources are, first found:

   a. ``MARQUEZ_SOURCE``: a checkout of the Marquez repository at tag ``0.50.0`` (what a
      user outside this repository's workplace uses);
   b. a source snapshot, ``marquez-0.50.0-src.tar.gz`` (``api/src/main``,
      ``clients/java/src/main``, ``lombok.config``, ``LICENSE`` and the tag's ``COMMIT``),
      named by ``MARQUEZ_SOURCE_ARCHIVE`` or found in ``vendor/`` of the workplace folder
      laid beside the repository. It is there because the project's machines and CI reach
      Maven Central but not Marquez's repository, and a fresh machine has no checkout: the
      snapshot is unpacked into the cache and built as in a.

The ``ready`` file records what the classpath came from (Central, or the source and its
commit). When nothing works, :class:`MarquezUnavailable` says which step failed and how to
fix it.

Running it: PostgreSQL from Debian's ``postgresql`` package (``initdb``/``pg_ctl``) in a
directory of its own on a free loopback port — as the unprivileged ``nobody`` when we are
root, since ``initdb`` refuses root — one database per Marquez server; then
``java -cp lib/* marquez.MarquezApp server marquez.yml`` on free loopback ports, ready once
the admin port's ``/healthcheck`` answers 200. :meth:`MarquezServer.stop` and
:meth:`MarquezServer.start` stop and start the JVM alone (for outage tests); the cluster and
its data stay.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import requests
import yaml

from tests.support.paths import CACHE, REPO
from tests.support.ports import free_port
from tests.support.tiers import require_full

__all__ = [
    "MARQUEZ_VERSION",
    "MarquezServer",
    "MarquezUnavailable",
    "PostgresCluster",
    "ensure_marquez",
    "marquez_home",
]

MARQUEZ_VERSION = "0.50.0"
COORDINATE = f"io.github.marquezproject:marquez-api:{MARQUEZ_VERSION}"
# The versions Marquez 0.50.0's Gradle build declares (build.gradle, api/build.gradle,
# clients/java/build.gradle at that tag): what a source build compiles against.
_SOURCE_BUILD_DEPENDENCIES = [
    *(
        f"io.dropwizard:dropwizard-{m}:2.1.12"
        for m in ("core", "jdbi3", "json-logging", "http2", "assets", "jackson")
    ),
    *(
        f"io.prometheus:{m}:0.16.0"
        for m in ("simpleclient", "simpleclient_dropwizard", "simpleclient_hotspot")
    ),
    "io.prometheus:simpleclient_servlet:0.16.0",
    "io.openlineage:openlineage-java:1.13.1",
    *(f"org.jdbi:jdbi3-{m}:3.40.0" for m in ("core", "jackson2", "postgres", "sqlobject")),
    "com.google.guava:guava:32.1.3-jre",
    "org.dhatim:dropwizard-sentry:2.1.6",
    "io.sentry:sentry:6.34.0",
    "org.flywaydb:flyway-core:8.5.13",
    "org.postgresql:postgresql:42.6.0",
    "com.graphql-java:graphql-java:20.9",
    "com.graphql-java-kickstart:graphql-java-servlet:12.0.0",
    "org.opensearch.client:opensearch-rest-client:2.15.0",
    "org.opensearch.client:opensearch-java:2.6.0",
    "org.slf4j:slf4j-api:1.7.36",
    "org.apache.commons:commons-lang3:3.14.0",
    "org.apache.httpcomponents:httpclient:4.5.14",
]
_LOMBOK = ("org.projectlombok", "lombok", "1.18.34")
# Marquez's sources at tag 0.50.0 as laid beside the repository for the project's machines
# (which cannot reach Marquez's repository); MARQUEZ_SOURCE_ARCHIVE names another copy.
_SNAPSHOT_NAME = f"marquez-{MARQUEZ_VERSION}-src.tar.gz"
_SNAPSHOT = REPO.parent / "shared" / "vendor" / _SNAPSHOT_NAME
# A cold JVM running Flyway's migrations on a loaded 2-core machine: a bound, not a target.
START_TIMEOUT = 240.0
# Debian installs the server binaries here; initdb/pg_ctl are not on PATH.
_PG_BIN_ROOT = Path("/usr/lib/postgresql")


class MarquezUnavailable(RuntimeError):
    """Marquez or PostgreSQL cannot be had on this machine; the message says which step."""


def marquez_home() -> Path:
    """``$LINEAGE_PROXY_CACHE/marquez-<version>``: where the classpath is kept."""
    return CACHE / f"marquez-{MARQUEZ_VERSION}"


def _pom(dependencies: list[tuple[str, str]], build: str = "") -> str:
    """A pom of ``(group:artifact:version, scope)`` dependencies and a ``<build>``."""
    deps = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version><scope>{s}</scope></dependency>"
        for (g, a, v), s in ((c.split(":"), s) for c, s in dependencies)
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>lineage-proxy.tests</groupId><artifactId>marquez-runtime</artifactId>"
        f"<version>{MARQUEZ_VERSION}</version><properties>"
        "<maven.compiler.release>17</maven.compiler.release>"
        "<project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>"
        f"<version>{MARQUEZ_VERSION}</version></properties>"
        f"<dependencies>{deps}</dependencies>{build}</project>"
    )


def _mvn(work: Path, *goals: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("mvn") is None:
        raise MarquezUnavailable("mvn is not on PATH (apt-get install maven)")
    return subprocess.run(
        ["mvn", "-B", "-q", "-Dstyle.color=never", *goals],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=1800,
    )


def _maven_errors(result: subprocess.CompletedProcess[str]) -> str:
    """Maven's first ``[ERROR]`` line: which artifact or step failed."""
    for line in (result.stdout + result.stderr).splitlines():
        _, marker, text = line.partition("[ERROR] ")
        if marker and text.strip():
            return text.strip()
    return (result.stderr or result.stdout).strip()[-500:]


def _fetch_from_central(lib: Path, work: Path) -> str | None:
    """Copy marquez-api and its runtime dependencies into ``lib``; the error if refused."""
    (work / "pom.xml").write_text(_pom([(COORDINATE, "compile")]))
    result = _mvn(
        work,
        "-U",  # ask Central again: a refusal cached by an earlier run is not the answer
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={lib}",
    )
    return None if result.returncode == 0 else _maven_errors(result)


def _build_from_source(source: Path, lib: Path, work: Path) -> None:
    """Compile a Marquez checkout's ``api`` and ``clients/java`` (tag 0.50.0) with Maven."""
    api = source / "api" / "src" / "main"
    if not (api / "java" / "marquez" / "MarquezApp.java").is_file():
        raise MarquezUnavailable(f"MARQUEZ_SOURCE={source} is not a Marquez checkout")
    dependencies = [(d, "compile") for d in _SOURCE_BUILD_DEPENDENCIES]
    dependencies.append((":".join(_LOMBOK), "provided"))
    lombok = "".join(
        f"<{k}>{v}</{k}>"
        for k, v in zip(("groupId", "artifactId", "version"), _LOMBOK, strict=True)
    )
    # Gradle's processResources replaces @version@ (the banner); SQL and assets verbatim.
    resources = (
        f"<resource><directory>{api}/resources</directory><filtering>true</filtering>"
        "<excludes><exclude>**/*.sql</exclude><exclude>assets/**</exclude></excludes></resource>"
        f"<resource><directory>{api}/resources</directory><filtering>false</filtering>"
        "<includes><include>**/*.sql</include><include>assets/**</include></includes></resource>"
    )
    clients = f"{source}/clients/java/src/main/java"
    build = (
        f"<build><sourceDirectory>{api}/java</sourceDirectory><plugins>"
        + _plugin(
            "org.codehaus.mojo:build-helper-maven-plugin:3.5.0",
            "<executions><execution><phase>generate-sources</phase><goals><goal>add-source"
            f"</goal></goals><configuration><sources><source>{clients}</source></sources>"
            "</configuration></execution></executions>",
        )
        + _plugin(
            "org.apache.maven.plugins:maven-compiler-plugin:3.13.0",
            f"<configuration><parameters>true</parameters><annotationProcessorPaths><path>{lombok}</path>"
            "</annotationProcessorPaths></configuration>",
        )
        + _plugin(
            "org.apache.maven.plugins:maven-resources-plugin:3.3.1",
            "<configuration><delimiters><delimiter>@</delimiter></delimiters>"
            "<useDefaultDelimiters>false</useDefaultDelimiters></configuration>",
        )
        + f"</plugins><resources>{resources}</resources></build>"
    )
    (work / "pom.xml").write_text(_pom(dependencies, build))
    if (source / "lombok.config").is_file():
        shutil.copy(source / "lombok.config", work / "lombok.config")
    result = _mvn(
        work,
        "package",
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={lib}",
    )
    if result.returncode != 0:
        raise MarquezUnavailable(f"building {source} failed: {_maven_errors(result)}")
    shutil.copy(work / "target" / f"marquez-runtime-{MARQUEZ_VERSION}.jar", lib)


def _plugin(coordinate: str, body: str) -> str:
    group, artifact, version = coordinate.split(":")
    return (
        f"<plugin><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version>{body}</plugin>"
    )


def ensure_marquez() -> Path:
    """The ``lib`` directory of a runnable Marquez, fetched or built once into the cache."""
    require_full("Marquez (a JVM)")
    home = marquez_home()
    lib = home / "lib"
    if (home / "ready").is_file():
        return lib
    partial = Path(tempfile.mkdtemp(prefix="lib.", dir=_made(home)))
    try:
        with tempfile.TemporaryDirectory(prefix="mvn.", dir=home) as work:
            origin = _obtain(partial, Path(work))
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    shutil.rmtree(lib, ignore_errors=True)
    partial.rename(lib)  # atomic: another worker sees a whole lib or none
    (home / "ready").write_text(origin + "\n")
    return lib


def _obtain(lib: Path, work: Path) -> str:
    """Fill ``lib`` from the first source that works; returns what it came from."""
    source = os.environ.get("MARQUEZ_SOURCE")
    if source:
        _build_from_source(Path(source), lib, work)
        return f"built from MARQUEZ_SOURCE={source} ({_commit_of(Path(source))})"
    refused = _fetch_from_central(lib, work)
    if refused is None:
        return f"{COORDINATE} from Maven Central"
    snapshot = Path(os.environ.get("MARQUEZ_SOURCE_ARCHIVE") or _SNAPSHOT)
    if not snapshot.is_file():
        raise MarquezUnavailable(
            f"Maven Central did not serve {COORDINATE} ({refused}) and there is no source "
            f"snapshot at {snapshot}. Set MARQUEZ_SOURCE to a clone of the Marquez repository "
            "at tag 0.50.0 to build it instead"
        )
    unpacked = _unpack(snapshot, work / "source")
    _build_from_source(unpacked, lib, work)
    return f"built from {snapshot} ({_commit_of(unpacked)})"


def _unpack(snapshot: Path, into: Path) -> Path:
    """``snapshot``'s one top folder, unpacked under ``into`` (no path leaves it)."""
    try:
        with tarfile.open(snapshot) as archive:
            archive.extractall(into, filter="data")
    except (OSError, tarfile.TarError) as error:
        raise MarquezUnavailable(f"cannot unpack {snapshot}: {error}") from error
    tops = [path for path in into.iterdir() if path.is_dir()]
    if len(tops) != 1:
        raise MarquezUnavailable(f"{snapshot} holds {len(tops)} top folders, expected one")
    return tops[0]


def _commit_of(source: Path) -> str:
    """The Marquez commit a source tree is at: its ``COMMIT`` file, else git's HEAD."""
    if (source / "COMMIT").is_file():
        return "commit " + (source / "COMMIT").read_text().strip()
    result = subprocess.run(
        ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return "commit " + result.stdout.strip() if result.returncode == 0 else "commit unknown"


def _made(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _pg_bin(tool: str) -> str:
    versions = sorted(_PG_BIN_ROOT.glob(f"*/bin/{tool}"), key=lambda p: int(p.parts[-3]))
    if versions:
        return str(versions[-1])
    found = shutil.which(tool)
    if found is None:
        raise MarquezUnavailable(f"{tool} not found: apt-get install postgresql")
    return found


class PostgresCluster:
    """A private PostgreSQL cluster on a free loopback port, trust auth for user marquez."""

    def __init__(self, root: Path) -> None:
        self.data = root / "pgdata"
        self.port = free_port()
        # initdb refuses to run as root: the cluster then belongs to nobody.
        self._as = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []

    def _run(self, *args: str) -> None:
        result = subprocess.run([*self._as, *args], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise MarquezUnavailable(f"{' '.join(args[:2])} failed: {result.stderr.strip()}")

    def start(self) -> None:
        require_full("PostgreSQL")
        self.data.mkdir(parents=True)
        if self._as:
            shutil.chown(self.data, "nobody")
            # nobody must reach the directory through its parents.
            for parent in self.data.parents:
                if str(parent).startswith(tempfile.gettempdir() + "/"):
                    parent.chmod(parent.stat().st_mode | 0o711)
        self._run(
            _pg_bin("initdb"), "-D", str(self.data), "-U", "marquez", "--auth=trust", "-E", "UTF8"
        )
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data} -c fsync=off"
        self._run(
            _pg_bin("pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.data / "server.log"),
            "-w",
            "-t",
            "120",
            "start",
        )

    def create_database(self, name: str) -> str:
        """A new database; returns its JDBC URL."""
        self._run(_pg_bin("createdb"), *self._connect(), name)
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{name}"

    def _connect(self) -> list[str]:
        return ["-h", "127.0.0.1", "-p", str(self.port), "-U", "marquez"]

    def query(self, database: str, sql: str) -> list[str]:
        """``sql``'s rows, one unaligned line each (psql -At): for what Marquez's API does
        not show, such as the order it stored events in."""
        result = subprocess.run(
            [_pg_bin("psql"), *self._connect(), "-d", database, "-At", "-c", sql],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return result.stdout.splitlines()

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")


class MarquezServer:
    """One Marquez API JVM on free loopback ports over ``jdbc_url``."""

    def __init__(self, lib: Path, cluster: PostgresCluster, database: str, root: Path) -> None:
        self.lib = lib
        self.cluster = cluster
        self.database = database
        jdbc_url = cluster.create_database(database)
        self.root = _made(root)
        self.port = free_port()
        self.admin_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = self.root / "marquez.yml"
        self.config.write_text(yaml.safe_dump(_config(jdbc_url, self.port, self.admin_port)))
        self.log_path = self.root / "marquez.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.started_in: float | None = None
        self._began = 0.0

    def start(self) -> None:
        """Start the JVM and wait for the admin healthcheck (migrations run first)."""
        self.launch()
        self.wait_healthy()

    def launch(self) -> None:
        """Start the JVM without waiting (several servers then start side by side)."""
        self._began = time.monotonic()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    "java",
                    "-Xmx512m",
                    "-cp",
                    f"{self.lib}/*",
                    "marquez.MarquezApp",
                    "server",
                    str(self.config),
                ],
                cwd=self.root,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_healthy(self) -> None:
        """Until the admin port's /healthcheck answers 200; the JVM's exit or
        START_TIMEOUT raise :class:`MarquezUnavailable` with the log's end."""
        assert self.process is not None
        deadline = self._began + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise MarquezUnavailable(
                    f"Marquez exited {self.process.returncode}: {self.log_tail()}"
                )
            with contextlib.suppress(requests.RequestException):
                health = f"http://127.0.0.1:{self.admin_port}/healthcheck"
                if requests.get(health, timeout=2).status_code == 200:
                    self.started_in = time.monotonic() - self._began
                    return
            time.sleep(0.2)
        self.stop()
        raise MarquezUnavailable(f"Marquez not healthy within {START_TIMEOUT} s: {self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM (Dropwizard drains and exits), SIGKILL if it hangs."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def rss_bytes(self) -> int:
        """The JVM's resident set size now (VmRSS)."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def arrival_order(self) -> list[bytes]:
        """Every event Marquez stored, as stored, in the order it stored them."""
        sql = "SELECT event FROM lineage_events ORDER BY created_at"
        return [row.encode() for row in self.cluster.query(self.database, sql)]

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""


def _config(jdbc_url: str, port: int, admin_port: int) -> dict[str, object]:
    loopback = {"type": "http", "bindHost": "127.0.0.1"}
    return {
        "server": {
            "applicationConnectors": [{**loopback, "port": port}],
            "adminConnectors": [{**loopback, "port": admin_port}],
        },
        "db": {
            "driverClass": "org.postgresql.Driver",
            "url": jdbc_url,
            "user": "marquez",
            "password": "",
        },
        "migrateOnStartup": True,
        "graphql": {"enabled": False},
        "search": {"enabled": False},  # OpenSearch is optional; lineage needs only the DB
        "logging": {"level": "WARN", "appenders": [{"type": "console"}]},
    }


@contextlib.contextmanager
def marquez_servers(*names: str, root: Path | None = None) -> Iterator[dict[str, MarquezServer]]:
    """One PostgreSQL cluster and one Marquez server per name (each its own database),
    started together; everything stopped and removed on exit."""
    lib = ensure_marquez()
    base = Path(tempfile.mkdtemp(prefix="marquez-", dir=root))
    cluster = PostgresCluster(base)
    servers: dict[str, MarquezServer] = {}
    try:
        cluster.start()
        for name in names:
            servers[name] = MarquezServer(lib, cluster, name, base / name)
        for server in servers.values():
            server.launch()
        for server in servers.values():
            server.wait_healthy()
        yield servers
    finally:
        for server in servers.values():
            server.stop()
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """``fetch`` | ``run`` (start, print URLs, stop on Ctrl-C/SIGTERM)."""
    parser = argparse.ArgumentParser(prog="marquez", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["fetch", "run"])
    args = parser.parse_args(argv)
    # SIGTERM (scripts/marquez.sh stop) unwinds like Ctrl-C: Marquez, then PostgreSQL stop.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        if args.command == "fetch":
            print(ensure_marquez())
            return 0
        with marquez_servers("marquez") as servers:
            server = servers["marquez"]
            print(
                f"Marquez {MARQUEZ_VERSION} at {server.url} (admin {server.admin_port}), "
                f"started in {server.started_in:.1f} s, RSS {server.rss_bytes() / 2**20:.0f} MiB",
                flush=True,
            )
            with contextlib.suppress(KeyboardInterrupt):
                while server.process is not None and server.process.poll() is None:
                    time.sleep(1)
        return 0
    except MarquezUnavailable as error:
        print(f"marquez: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
