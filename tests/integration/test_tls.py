"""HTTPS on the proxy's listener (docs/deploy/tls.md): real TLS clients against certificates
issued in the test; the certificate re-read on SIGHUP by a real ``lineage-proxy serve``;
client certificates; tokens given as SHA-256 digests."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import http.client
import json
import logging
import os
import signal
import ssl
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import orjson
import pytest
import requests
from openlineage.client import OpenLineageClient

from tests.support.certificates import Issued, TestCA, fingerprint_of
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.processes import ServeProcess, serve_process, wait_until_ready
from tests.support.sample_events import run_event
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def ca(tmp_path: Path) -> TestCA:
    return TestCA(tmp_path)


async def https_post(
    url: str, event: object, context: ssl.SSLContext, **headers: str
) -> tuple[int, dict]:
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
        session.post(f"{url}/api/v1/lineage", data=orjson.dumps(event), headers=headers) as resp,
    ):
        return resp.status, orjson.loads(await resp.read())


async def test_https_post_lands_in_kafka_and_plain_http_to_the_tls_port_fails(
    start_proxy, broker, topic, ca, caplog
):
    server = ca.issue("proxy")
    event = run_event()
    async with start_proxy(server={"tls": server.tls_config()}) as url:
        assert url.startswith("https://")
        assert await https_post(url, event, ca.client_context()) == (200, {"status": "success"})
        plain = url.replace("https://", "http://")
        with pytest.raises(aiohttp.ClientError):
            async with (
                aiohttp.ClientSession() as session,
                session.post(f"{plain}/api/v1/lineage", data=orjson.dumps(run_event())) as resp,
            ):
                await resp.read()
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    [record] = read_all_produced_so_far(broker.bootstrap_servers, topic)
    assert orjson.loads(record.value) == event


async def test_a_connection_that_never_starts_the_handshake_is_closed_by_the_header_timeout(
    start_proxy, ca
):
    server = ca.issue("proxy")
    limits = {"tls": server.tls_config(), "header_timeout_seconds": 0.5}
    async with start_proxy(server=limits) as url:
        host, port = url.removeprefix("https://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        # asyncio's own handshake timeout is 60 s; the proxy's header deadline applies.
        async with asyncio.timeout(30):
            assert await reader.read() == b""
        writer.close()
        assert (await https_post(url, run_event(), ca.client_context()))[0] == 200


async def test_client_cert_required_refuses_a_client_without_one_and_accepts_one_with_it(
    start_proxy, broker, topic, ca
):
    server, client = ca.issue("proxy"), ca.issue("spark-team-a")
    (ca.directory / "other").mkdir()
    stranger = TestCA(ca.directory / "other").issue("stranger")  # signed by another CA
    tls = server.tls_config(client_ca_file=str(ca.cert), client_cert="required")
    event = run_event()
    async with start_proxy(server={"tls": tls}) as url:
        for refused in (ca.client_context(), ca.client_context(stranger)):
            with pytest.raises(aiohttp.ClientError):
                await https_post(url, run_event(), refused)
        assert await https_post(url, event, ca.client_context(client)) == (
            200,
            {"status": "success"},
        )
    [record] = read_all_produced_so_far(broker.bootstrap_servers, topic)
    assert orjson.loads(record.value) == event


async def test_a_token_given_as_its_sha256_authorizes_and_other_tokens_do_not(
    start_proxy, broker, topic
):
    digest = hashlib.sha256(b"s3cret-a").hexdigest()
    auth = {
        "enabled": True,
        "tokens": [{"name": "team-a", "token_sha256": digest, "namespaces": ["team-a*"]}],
    }
    async with start_proxy(auth=auth) as url, aiohttp.ClientSession() as session:

        async def post(token: str) -> int:
            async with session.post(
                f"{url}/api/v1/lineage",
                data=orjson.dumps(run_event(namespace="team-a")),
                headers={"Authorization": f"Bearer {token}"},
            ) as resp:
                return resp.status

        assert await post("s3cret-a") == 200
        assert await post(digest) == 401  # the digest itself is not a token
        assert await post("s3cret-b") == 401
    assert len(read_all_produced_so_far(broker.bootstrap_servers, topic)) == 1


async def test_a_certificate_renewed_on_disk_is_served_without_a_signal(start_proxy, ca):
    live, renewed = ca.issue("live"), ca.issue("renewed")
    tls = live.tls_config(reload_interval_seconds=0.1)
    async with start_proxy(server={"tls": tls}) as url:
        assert await asyncio.to_thread(ca.served_fingerprint, url) == live.fingerprint
        install(renewed, live)
        await ca.wait_until_served(url, renewed.fingerprint)
        assert (await https_post(url, run_event(), ca.client_context()))[0] == 200


@contextlib.contextmanager
def tls_process(broker, server: Issued, ca: TestCA) -> Iterator[tuple[ServeProcess, str]]:
    """``lineage-proxy serve`` over TLS with ``server``'s files, ready; only SIGHUP
    reloads them. At exit it must stop cleanly on SIGTERM."""
    process, url = serve_process(
        broker.bootstrap_servers,
        server__tls__cert_file=str(server.cert),
        server__tls__key_file=str(server.key),
        server__tls__reload_interval_seconds="0",
    )
    try:
        wait_until_ready(url, process, verify=str(ca.cert))
        yield process, url
        # Still serving on a new connection, whatever happened to the certificate.
        assert requests.post(
            f"{url}/api/v1/lineage", json=run_event(), timeout=10, verify=str(ca.cert)
        ).ok
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0


def log_lines(process: ServeProcess, text: str) -> list[str]:
    return [line for line in process.log().splitlines() if text in line]


def wait_for_log(process: ServeProcess, text: str, times: int = 1) -> None:
    """Until ``text`` was logged ``times`` times (the process dying fails the wait)."""
    wait_until(lambda: len(log_lines(process, text)) >= times, 30, repr(text), alive=process)


def _peer_certificate(sock: ssl.SSLSocket) -> bytes:
    der = sock.getpeercert(binary_form=True)
    assert der is not None, "the server sent no certificate"
    return der


def install(source: Issued, target: Issued) -> None:
    """Copy ``source``'s files over ``target``'s paths (a rotated certificate)."""
    target.cert.write_bytes(source.cert.read_bytes())
    target.key.write_bytes(source.key.read_bytes())


def test_sighup_serves_the_new_certificate_to_new_connections_and_keeps_open_ones(broker, ca):
    live, renewed = ca.issue("live"), ca.issue("renewed")
    first = live.fingerprint
    with tls_process(broker, live, ca) as (process, url):
        host, port = url.removeprefix("https://").split(":")
        assert ca.served_fingerprint(url) == first
        # A keep-alive connection opened before the reload.
        old = http.client.HTTPSConnection(host, int(port), context=ca.client_context())
        old.request("GET", "/healthz")
        assert old.getresponse().read() and old.sock is not None
        socket_before = old.sock
        assert fingerprint_of(_peer_certificate(socket_before)) == first

        install(renewed, live)
        process.send_signal(signal.SIGHUP)
        wait_for_log(process, f"server.tls reloaded: certificate sha256 {renewed.fingerprint}")
        assert ca.served_fingerprint(url) == renewed.fingerprint
        # The open connection keeps its session (same socket, the old certificate).
        old.request("POST", "/api/v1/lineage", body=orjson.dumps(run_event()))
        assert old.getresponse().status == 200
        assert old.sock is socket_before
        assert fingerprint_of(_peer_certificate(old.sock)) == first
        old.close()


def test_a_broken_certificate_on_sighup_keeps_the_old_one_with_one_log_line(broker, ca):
    live, stranger = ca.issue("live"), ca.issue("stranger")
    with tls_process(broker, live, ca) as (process, url):
        good_key = live.key.read_bytes()
        live.key.write_bytes(stranger.key.read_bytes())  # a key that is not the cert's
        process.send_signal(signal.SIGHUP)
        wait_for_log(process, "TLS reload refused")
        # The marker: a good reload after it. Reloads run one after the other, so any
        # second line the broken one logged would come before the marker's line.
        live.key.write_bytes(good_key)
        process.send_signal(signal.SIGHUP)
        wait_for_log(process, "server.tls reloaded")
        (refused,) = log_lines(process, "TLS reload refused")
        assert f"server.tls.key_file: {live.key}: does not match server.tls.cert_file" in refused
        assert process.poll() is None
        assert ca.served_fingerprint(url) == live.fingerprint


def test_a_key_that_does_not_match_the_certificate_stops_serve_at_start_naming_both(broker, ca):
    live, stranger = ca.issue("live"), ca.issue("stranger")
    process, _ = serve_process(
        broker.bootstrap_servers,
        server__tls__cert_file=str(live.cert),
        server__tls__key_file=str(stranger.key),
    )
    assert process.wait(timeout=60) == 2
    assert (
        f"server.tls.key_file: {stranger.key}: does not match server.tls.cert_file ({live.cert})"
        in process.log()
    )


async def test_a_client_certificates_common_name_stands_for_a_token_and_its_namespaces(
    start_proxy, broker, topic, ca
):
    server, client = ca.issue("proxy"), ca.issue("spark-team-a")
    tls = server.tls_config(client_ca_file=str(ca.cert), client_cert="optional")
    auth = {
        "enabled": True,
        "tokens": [
            {"name": "team-a-spark", "client_cn": "spark-team-a", "namespaces": ["team-a*"]},
            {"name": "airflow", "token": "s3cret", "namespaces": ["*"]},
        ],
    }
    with_cert, without_cert = ca.client_context(client), ca.client_context()
    async with start_proxy(server={"tls": tls}, auth=auth) as url:
        assert (await https_post(url, run_event(namespace="team-a"), with_cert))[0] == 200
        status, body = await https_post(url, run_event(namespace="team-b"), with_cert)
        assert status == 403 and body["details"][0]["pointer"] == "/job/namespace"
        assert (await https_post(url, run_event(namespace="team-a"), without_cert))[0] == 401
        bearer = {"Authorization": "Bearer s3cret"}
        assert (await https_post(url, run_event(namespace="team-b"), without_cert, **bearer))[
            0
        ] == 200
    namespaces = [
        orjson.loads(r.value)["job"]["namespace"]
        for r in read_all_produced_so_far(broker.bootstrap_servers, topic)
    ]
    assert sorted(namespaces) == ["team-a", "team-b"]


async def test_openlineage_python_client_posts_over_mutual_tls_configured_by_environment(
    start_proxy, broker, topic, ca, monkeypatch
):
    """The client users run, with its own sslContext settings (CA bundle, client
    certificate); the certificate's common name stands for a token."""
    server, client = ca.issue("proxy"), ca.issue("airflow-prod")
    tls = server.tls_config(client_ca_file=str(ca.cert), client_cert="required")
    auth = {"enabled": True, "tokens": [{"name": "airflow", "client_cn": "airflow-prod"}]}
    for name in [n for n in os.environ if n.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(name)
    event = run_event(namespace="airflow")
    async with start_proxy(server={"tls": tls}, auth=auth) as url:
        monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "http")
        monkeypatch.setenv("OPENLINEAGE__TRANSPORT__URL", url)
        ssl_context = {
            "caCertPath": str(ca.cert),
            "clientCertPath": str(client.cert),
            "clientKeyPath": str(client.key),
        }
        monkeypatch.setenv("OPENLINEAGE__TRANSPORT__SSLCONTEXT", json.dumps(ssl_context))
        openlineage = OpenLineageClient()
        # The client is synchronous; run it off the loop that serves the proxy.
        # A dict, as clients that build events themselves emit them (the transport
        # serializes whatever it is given); the stubs only name the client's classes.
        await asyncio.to_thread(openlineage.transport.emit, event)  # type: ignore[arg-type]
        await asyncio.to_thread(openlineage.close)
    [record] = read_all_produced_so_far(broker.bootstrap_servers, topic)
    assert orjson.loads(record.value) == event
