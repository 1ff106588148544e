"""A real Marquez pair for this worker: ``direct`` (events POSTed to it as a client would)
and ``proxied`` (events through proxy → Kafka → ``lineage-proxy consume``), each on its own
database of one private PostgreSQL cluster (tests/support/marquez.py).

Started once per test process; every test uses namespaces or dataset names of its own, so
tests never read each other's events from the shared servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.consumers import TEST_GROUP, consume_process, status_of
from tests.support.figures import report
from tests.support.marquez import MarquezServer, MarquezUnavailable, ensure_marquez, marquez_servers
from tests.support.ports import free_port
from tests.support.tiers import starts
from tests.support.waiting import wait_for


@pytest.fixture(scope="session")
@starts("Marquez (a JVM) and PostgreSQL")
def marquez() -> Iterator[dict[str, MarquezServer]]:
    """``{"direct": …, "proxied": …}``, two real Marquez 0.50.0 servers.

    When Marquez cannot be had the tests fail with the reason, never skip: the suite exists
    to run the real server (tests/support/marquez.py says where it comes from)."""
    try:
        ensure_marquez()
    except MarquezUnavailable as error:
        pytest.fail(f"real Marquez cannot be had here: {error}")
    with marquez_servers("direct", "proxied") as servers:
        report(
            "marquez: start (two servers, one PostgreSQL cluster)",
            **{
                f"{name}_seconds_to_healthy": round(server.started_in or 0, 1)
                for name, server in servers.items()
            },
            **{
                f"{name}_rss_mib": round(server.rss_bytes() / 2**20)
                for name, server in servers.items()
            },
        )
        yield servers


@contextlib.asynccontextmanager
async def consuming_into(
    tmp_path: Path, bootstrap: str, topic: str, marquez_url: str
) -> AsyncIterator[int]:
    """``lineage-proxy consume`` as a real process, ``topic`` → Marquez at ``marquez_url``
    with the default retry and breaker; yields its status port once it holds partitions."""
    port = free_port()
    consumer: dict[str, Any] = {
        "target": {"kind": "marquez", "url": marquez_url},
        "topics": [topic],
        "group_id": f"group.{topic}",
        "group": TEST_GROUP,
        "status_port": port,
    }
    config = tmp_path / "consume.yaml"
    config.write_text(
        yaml.safe_dump({"kafka": {"bootstrap_servers": bootstrap}, "consumers": {"m": consumer}})
    )
    process = consume_process(config, "m")
    try:

        async def ready() -> bool:
            assert process.poll() is None, process.log()
            with contextlib.suppress(OSError):
                status, body = await status_of(port, "/healthz")
                return status == 200 and bool(json.loads(body).get("assigned"))
            return False

        await wait_for(ready, within=90, what="the consumer to be ready")
        yield port
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 30)
    assert process.returncode == 0, process.log()
