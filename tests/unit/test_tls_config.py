"""``server.tls`` / ``status_tls``: a file that does not load fails the start naming the
field and the file (proxy/support/tls.py), and relative paths are under the config's folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    PrivateFormat,
    load_pem_private_key,
)

from consumers.run import running_daemons
from proxy.config.settings import ProxyConfig, load_config
from proxy.support.tls import TlsConfig, server_context
from proxy.support.yaml_source import ConfigError
from tests.support.certificates import Issued, TestCA
from tests.support.config_errors import config_refusal


@pytest.fixture
def ca(tmp_path: Path) -> TestCA:
    return TestCA(tmp_path)


@pytest.fixture
def live(ca: TestCA) -> Issued:
    return ca.issue("live")


def refusal(**fields: object) -> str:
    with pytest.raises(ConfigError) as refused:
        server_context(TlsConfig.model_validate(fields), "server.tls")
    return str(refused.value)


def test_a_matching_certificate_and_key_load(live: Issued, ca: TestCA):
    context = server_context(TlsConfig(cert_file=live.cert, key_file=live.key), "server.tls")
    assert context.verify_mode.name == "CERT_NONE"
    required = TlsConfig(
        cert_file=live.cert, key_file=live.key, client_ca_file=ca.cert, client_cert="required"
    )
    context = server_context(required, "server.tls")
    assert context.verify_mode.name == "CERT_REQUIRED"
    # Client certificates are checked against client_ca_file only, never the system's CAs.
    assert context.cert_store_stats()["x509_ca"] == 1


def test_a_missing_certificate_is_named_with_its_field(live: Issued, tmp_path: Path):
    missing = tmp_path / "nope.pem"
    assert refusal(cert_file=missing, key_file=live.key) == (
        f"server.tls.cert_file: {missing}: cannot read: No such file or directory"
    )


def test_a_file_that_is_not_a_certificate_is_blamed_on_cert_file(live: Issued):
    assert refusal(cert_file=live.key, key_file=live.key) == (
        f"server.tls.cert_file: {live.key}: no PEM certificate in it"
    )


def test_a_key_of_another_certificate_is_a_mismatch_naming_both_files(live: Issued, ca: TestCA):
    other = ca.issue("other")
    assert refusal(cert_file=live.cert, key_file=other.key) == (
        f"server.tls.key_file: {other.key}: does not match server.tls.cert_file ({live.cert})"
    )


def test_a_file_that_is_not_a_key_is_blamed_on_key_file(live: Issued):
    assert refusal(cert_file=live.cert, key_file=live.cert) == (
        f"server.tls.key_file: {live.cert}: no PEM private key in it"
    )


def test_an_encrypted_key_is_refused_without_asking_for_a_password(live: Issued, tmp_path: Path):
    key = load_pem_private_key(live.key.read_bytes(), password=None)
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(
        key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(b"pw"))
    )
    assert refusal(cert_file=live.cert, key_file=encrypted).startswith(
        f"server.tls.key_file: {encrypted}: the key is encrypted"
    )


def test_a_client_ca_file_without_certificates_is_named(live: Issued):
    assert refusal(
        cert_file=live.cert, key_file=live.key, client_ca_file=live.key, client_cert="optional"
    ) == (f"server.tls.client_ca_file: {live.key}: no PEM certificate in it")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"client_cert": "required"}, "client_cert: required needs client_ca_file"),
        ({"client_ca_file": "ca.pem"}, "client_ca_file is set but client_cert is none"),
        ({"client_cert": "sometimes"}, "Input should be 'none', 'optional' or 'required'"),
    ],
)
def test_client_certificate_settings_are_checked_in_the_config(
    tmp_path: Path, fields: dict[str, str], message: str
):
    tls = ", ".join(f"{k}: {v}" for k, v in fields.items())
    config, refused = config_refusal(
        tmp_path, f"server:\n  tls: {{cert_file: c.pem, key_file: k.pem, {tls}}}\n"
    )
    assert refused.startswith(f"{config}:2: server.tls") and message in refused


def test_relative_tls_files_are_under_the_config_files_folder(tmp_path: Path):
    config = tmp_path / "config.yaml"
    config.write_text(
        "server:\n  tls: {cert_file: tls/c.pem, key_file: /etc/k.pem}\n"
        "consumers:\n  m:\n    target: {kind: marquez, url: 'http://m:5000'}\n"
        "    status_tls: {cert_file: s.pem, key_file: s.key}\n",
        encoding="utf-8",
    )
    loaded = load_config(config, environ={})
    assert loaded.server.tls is not None
    assert (loaded.server.tls.cert_file, loaded.server.tls.key_file) == (
        tmp_path / "tls/c.pem",
        Path("/etc/k.pem"),
    )
    status = loaded.consumers["m"].status_tls
    assert status is not None and status.cert_file == tmp_path / "s.pem"


async def test_a_status_certificate_that_does_not_load_stops_consumers_before_they_start(
    tmp_path: Path,
):
    missing = tmp_path / "status.pem"
    config = ProxyConfig.model_validate(
        {
            "kafka": {"bootstrap_servers": "127.0.0.1:9"},  # never reached
            "consumers": {
                "marquez": {
                    "target": {"kind": "marquez", "url": "http://127.0.0.1:9"},
                    "status_port": 0,
                    "status_tls": {"cert_file": str(missing), "key_file": str(missing)},
                }
            },
        }
    )
    with pytest.raises(ConfigError) as refused:
        async with running_daemons(config.consumers, config.kafka, ["marquez"]):
            pass
    assert str(refused.value) == (
        f"consumers.marquez.status_tls.cert_file: {missing}: cannot read: No such file or directory"
    )
