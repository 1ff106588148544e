"""A consumer daemon's status port over TLS (``status_tls``, the same keys as
``server.tls``): /healthz answers over https to a client that trusts the CA, a
plain-HTTP client gets nothing, and a certificate renewed on disk is picked up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from consumers.run import running_daemons
from proxy.config.settings import ProxyConfig
from tests.support.certificates import TestCA
from tests.support.consumers import TEST_GROUP
from tests.support.doubles.marquez_double import MarquezDouble
from tests.support.ports import free_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


async def test_status_port_over_tls_answers_healthz_and_refuses_plain_http(
    broker, topic_with, tmp_path: Path
):
    topic = topic_with(1)
    ca = TestCA(tmp_path)
    status = ca.issue("consumer-status")
    port = free_port()
    async with MarquezDouble() as marquez:
        config = ProxyConfig.model_validate(
            {
                "kafka": {"bootstrap_servers": broker.bootstrap_servers, "topic": topic},
                "consumers": {
                    "marquez": {
                        "group": TEST_GROUP,
                        "target": {"kind": "marquez", "url": marquez.url},
                        "status_port": port,
                        "status_tls": status.tls_config(reload_interval_seconds=0.1),
                    }
                },
            }
        )
        trusting = aiohttp.TCPConnector(ssl=ca.client_context())
        async with (
            running_daemons(config.consumers, config.kafka, ["marquez"]),
            aiohttp.ClientSession(connector=trusting) as session,
        ):
            health: dict[str, Any] = {}

            async def assigned() -> bool:
                nonlocal health
                async with session.get(f"https://127.0.0.1:{port}/healthz") as resp:
                    health = json.loads(await resp.text())
                    return resp.status == 200 and bool(health["assigned"])

            await wait_for(assigned, what="/healthz 200 with a partition assigned")
            assert health["problems"] == [] and health["assigned"] == [f"{topic}[0]"]
            # A certificate renewed on disk is served to new connections without a restart.
            renewed = ca.issue("renewed")
            status.cert.write_bytes(renewed.cert.read_bytes())
            status.key.write_bytes(renewed.key.read_bytes())
            url = f"https://127.0.0.1:{port}"
            await ca.wait_until_served(url, renewed.fingerprint)
            with pytest.raises(aiohttp.ClientError):
                async with (
                    aiohttp.ClientSession() as plain,
                    plain.get(f"http://127.0.0.1:{port}/healthz") as resp,
                ):
                    await resp.read()
