"""A real S3-compatible server for tests: S3Proxy (org.gaul:s3proxy, Apache-2.0) serving
the S3 API over a local directory (jclouds ``filesystem-nio2``).

Its jars come from Maven Central through ``scripts/s3.sh classpath`` (one place that
fetches, cached outside git). The server can be stopped and started again on the same
port and directory — an object-store outage that keeps what was stored.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.ports import free_port
from tests.support.tiers import require_full

__all__ = [
    "ACCESS_KEY",
    "BUCKET",
    "SECRET_KEY",
    "S3Server",
    "object_archive_target",
    "s3_credentials",
    "s3proxy_classpath",
]

ROOT = Path(__file__).resolve().parents[2]
ACCESS_KEY = "lineage-test-key"
SECRET_KEY = "lineage-test-secret"
# The JVM starts in seconds on a quiet machine, in about a minute on a loaded 2-core one.
_START_SECONDS = 240.0

_LOGBACK = """<configuration>
  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{20} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="OUT"/></root>
</configuration>
"""


def s3proxy_classpath() -> str:
    """S3Proxy's classpath, fetched on first use by scripts/s3.sh."""
    done = subprocess.run(
        [str(ROOT / "scripts" / "s3.sh"), "classpath"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/s3.sh classpath failed: {done.stderr.strip()}")
    return done.stdout.strip()


class S3Server:
    """S3Proxy on 127.0.0.1 with its data in ``directory``; ``start()``/``stop()`` again
    keep the port and the data."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        (directory / "data").mkdir(parents=True, exist_ok=True)
        self._properties = directory / "s3proxy.properties"
        self._properties.write_text(
            "\n".join(
                [
                    f"s3proxy.endpoint={self.endpoint}",
                    "s3proxy.authorization=aws-v2-or-v4",
                    f"s3proxy.identity={ACCESS_KEY}",
                    f"s3proxy.credential={SECRET_KEY}",
                    "jclouds.provider=filesystem-nio2",
                    f"jclouds.filesystem.basedir={directory / 'data'}",
                    # The provider wants these though the directory needs none.
                    "jclouds.identity=local",
                    "jclouds.credential=local",
                    "",
                ]
            )
        )
        self._logback = directory / "logback.xml"
        self._logback.write_text(_LOGBACK)
        self.log = directory / "s3proxy.log"

    def start(self) -> S3Server:
        require_full("S3Proxy (a JVM)")
        command = [
            "java",
            f"-Dlogback.configurationFile={self._logback}",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            s3proxy_classpath(),
            "org.gaul.s3proxy.Main",
            "--properties",
            str(self._properties),
        ]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + _START_SECONDS
        while not self.answers():
            if self.process.poll() is not None:
                raise RuntimeError(f"S3Proxy exited at start: {self.log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"S3Proxy did not answer within {_START_SECONDS:g} s")
            time.sleep(0.2)
        return self

    def answers(self) -> bool:
        """Whether the server answers HTTP (any status: anonymous requests get 403)."""
        try:
            with urllib.request.urlopen(self.endpoint, timeout=2):
                return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

    def stop(self) -> None:
        """Kill the server (SIGKILL: an outage, not a goodbye) and wait for it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self.process = None

    def client(self) -> Any:
        """A boto3 client of this server with the test credentials."""
        from proxy.destinations.object_archive.destination import s3_client

        with _environment(S3_TEST_KEY=ACCESS_KEY, S3_TEST_SECRET=SECRET_KEY):
            return s3_client(
                endpoint_url=self.endpoint,
                region="us-east-1",
                access_key_id_env="S3_TEST_KEY",
                secret_access_key_env="S3_TEST_SECRET",
                path_style=True,
            )


@contextlib.contextmanager
def _environment(**values: str) -> Any:
    import os

    old = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


BUCKET = "lineage-archive"


def object_archive_target(server: S3Server, prefix: str, **fields: Any) -> dict[str, Any]:
    """An ``object_archive`` target of ``server``'s bucket (credentials in S3_TEST_KEY and
    S3_TEST_SECRET: see :func:`s3_credentials`), objects finished after 0.5 s."""
    return {
        "kind": "object_archive",
        "bucket": BUCKET,
        "prefix": prefix,
        "endpoint_url": server.endpoint,
        "region": "us-east-1",
        "path_style": True,
        "access_key_id_env": "S3_TEST_KEY",
        "secret_access_key_env": "S3_TEST_SECRET",
        "max_file_age_seconds": 0.5,
        "batch_events": 100,
        "request_timeout_seconds": 3,
        **fields,
    }


def s3_credentials() -> dict[str, str]:
    """The environment an object_archive target of :func:`object_archive_target` needs."""
    return {"S3_TEST_KEY": ACCESS_KEY, "S3_TEST_SECRET": SECRET_KEY}
