"""Certificates for TLS tests, issued in the test by a throwaway CA (trustme): PEM files
on disk, as an operator would mount them, and client contexts that trust the CA."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography import x509
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    load_pem_private_key,
    pkcs12,
)

from tests.support.waiting import read_eventually

__all__ = ["Issued", "TestCA", "fingerprint_of"]


def fingerprint_of(der: bytes) -> str:
    """SHA-256 of a DER certificate: what tells two certificates apart."""
    return hashlib.sha256(der).hexdigest()


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path
    fingerprint: str

    def tls_config(self, **more: object) -> dict[str, object]:
        """``server.tls`` / ``status_tls`` for this certificate."""
        return {"cert_file": str(self.cert), "key_file": str(self.key), **more}


class TestCA:
    """A CA whose certificate is written to ``directory/ca.pem``."""

    __test__ = False  # not a test class, whatever its name says

    def __init__(self, directory: Path) -> None:
        self._ca = trustme.CA()
        self.directory = directory
        self.cert = directory / "ca.pem"
        self._ca.cert_pem.write_to_path(str(self.cert))

    def issue(self, name: str, identity: str = "127.0.0.1") -> Issued:
        """A leaf certificate for ``identity`` (an IP address or host name) with common
        name ``name``, written to ``name.pem`` and ``name.key``."""
        leaf = self._ca.issue_cert(identity, common_name=name)
        cert, key = self.directory / f"{name}.pem", self.directory / f"{name}.key"
        for blob in leaf.cert_chain_pems:
            blob.write_to_path(str(cert), append=cert.exists())
        leaf.private_key_pem.write_to_path(str(key))
        der = ssl.PEM_cert_to_DER_cert(leaf.cert_chain_pems[0].bytes().decode())
        return Issued(cert, key, fingerprint_of(der))

    def issue_keystore(self, name: str, password: str, identity: str = "127.0.0.1") -> Path:
        """A leaf certificate for ``identity`` and its key in a PKCS#12 keystore protected
        by ``password``, written to ``name.p12``: what a Java server (a Kafka broker's
        ``ssl.keystore.location``) loads."""
        leaf = self._ca.issue_cert(identity, common_name=name)
        key = load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
        cert, *chain = (x509.load_pem_x509_certificate(b.bytes()) for b in leaf.cert_chain_pems)
        blob = pkcs12.serialize_key_and_certificates(
            name.encode(),
            key,  # type: ignore[arg-type]  # trustme issues EC keys, which PKCS#12 takes
            cert,
            chain or None,
            BestAvailableEncryption(password.encode()),
        )
        path = self.directory / f"{name}.p12"
        path.write_bytes(blob)
        return path

    def client_context(self, client: Issued | None = None) -> ssl.SSLContext:
        """A client context that trusts this CA (and presents ``client``'s certificate)."""
        context = ssl.create_default_context(cafile=str(self.cert))
        if client is not None:
            context.load_cert_chain(client.cert, client.key)
        return context

    def served_fingerprint(self, url: str) -> str:
        """The certificate a new connection to ``https://host:port`` is shown (verified
        against this CA), by its fingerprint."""
        host, port = url.removeprefix("https://").split(":")
        with (
            socket.create_connection((host, int(port)), timeout=10) as raw,
            self.client_context().wrap_socket(raw, server_hostname=host) as connection,
        ):
            der = connection.getpeercert(binary_form=True)
        assert der is not None
        return fingerprint_of(der)

    async def wait_until_served(self, url: str, fingerprint: str) -> None:
        """Until a new connection to ``url`` is shown the certificate ``fingerprint``
        (at most 30 s)."""
        served = await read_eventually(
            lambda: asyncio.to_thread(self.served_fingerprint, url),
            lambda served: served == fingerprint,
            within=30,
            interval=0.1,
        )
        assert served == fingerprint, f"still serving {served}"
