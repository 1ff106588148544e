"""TLS for the proxy's listener and the consumers' status ports: one config, one builder.

``server.tls`` and a consumer's ``status_tls`` are both a :class:`TlsConfig`; both are
served through a :class:`ReloadableTls`, whose ``context`` is handed to the listening
socket once. Every handshake on it switches to the newest good context (an SNI callback,
which OpenSSL calls whether or not the client sent a server name), so a reload swaps
the certificate for new connections in one assignment while open connections keep the
one they shook hands with. Reloads come from SIGHUP (the proxy) and from polling the
files (both), so a certificate renewed on disk — by certbot, or a Kubernetes Secret
updated in place — is picked up without a signal. A certificate that does not load is
refused at start with the field and the file named
(:class:`~proxy.support.yaml_source.ConfigError`), and on a reload with one log line per change
of the files: the old certificate keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from proxy.support.file_state import FileState, file_state
from proxy.support.strict import StrictModel
from proxy.support.yaml_source import ConfigError

__all__ = ["ReloadableTls", "TlsConfig", "client_common_name", "server_context"]

log = logging.getLogger(__name__)

_VERIFY_MODES = {
    "none": ssl.CERT_NONE,
    "optional": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


class TlsConfig(StrictModel):
    # PEM file of the certificate, then its intermediates.
    cert_file: Path
    # PEM file of the certificate's private key, unencrypted (protect it by permissions).
    key_file: Path
    # PEM file of the CAs whose client certificates are accepted (needs client_cert).
    client_ca_file: Path | None = None
    # none: no client certificate asked; optional: verified when sent; required: a client
    # without a valid certificate is refused at the handshake.
    client_cert: Literal["none", "optional", "required"] = "none"
    # How often the files are checked for a change (then reloaded); 0: only SIGHUP.
    reload_interval_seconds: Annotated[float, Field(ge=0)] = 10.0

    @model_validator(mode="after")
    def _client_ca_with_client_cert(self) -> TlsConfig:
        if self.client_cert != "none" and self.client_ca_file is None:
            raise ValueError(f"client_cert: {self.client_cert} needs client_ca_file")
        if self.client_cert == "none" and self.client_ca_file is not None:
            raise ValueError("client_ca_file is set but client_cert is none")
        return self

    def under(self, base: Path) -> TlsConfig:
        """Relative file paths resolved against ``base`` (the config file's folder)."""
        updates = {name: base / path for name, path in self.files() if not path.is_absolute()}
        return self.model_copy(update=updates) if updates else self

    def files(self) -> list[tuple[str, Path]]:
        """(field name, path) of every file given."""
        names = ("cert_file", "key_file", "client_ca_file")
        return [(name, path) for name in names if (path := getattr(self, name)) is not None]


def _no_password() -> str:
    raise ValueError("the key is encrypted; give an unencrypted key (protect it by permissions)")


def _readable(field: str, path: Path) -> None:
    try:
        path.open("rb").close()
    except OSError as exc:
        raise ConfigError(f"{field}: {path}: cannot read: {exc.strerror or exc}") from None


def server_context(config: TlsConfig, field: str) -> ssl.SSLContext:
    """A server-side context from ``config`` (``field`` is its place in config.yaml,
    e.g. ``server.tls``); :class:`ConfigError` names the field and file that fail."""
    for name, path in config.files():
        _readable(f"{field}.{name}", path)
    try:  # the certificate alone first, so that a bad one is not blamed on the key
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_verify_locations(cafile=config.cert_file)
    except ssl.SSLError:
        raise ConfigError(
            f"{field}.cert_file: {config.cert_file}: no PEM certificate in it"
        ) from None
    # Server side with Python's defaults (TLS 1.2+); no system CAs: only client_ca_file's
    # are trusted for client certificates.
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(config.cert_file, config.key_file, password=_no_password)
    except ValueError as exc:
        raise ConfigError(f"{field}.key_file: {config.key_file}: {exc}") from None
    except ssl.SSLError as exc:
        problem = (
            f"does not match {field}.cert_file ({config.cert_file})"
            if exc.reason == "KEY_VALUES_MISMATCH"
            else "no PEM private key in it"
        )
        raise ConfigError(f"{field}.key_file: {config.key_file}: {problem}") from None
    if config.client_ca_file is not None:
        try:
            context.load_verify_locations(cafile=config.client_ca_file)
        except ssl.SSLError:
            raise ConfigError(
                f"{field}.client_ca_file: {config.client_ca_file}: no PEM certificate in it"
            ) from None
    context.verify_mode = _VERIFY_MODES[config.client_cert]
    return context


def client_common_name(transport: asyncio.BaseTransport | None) -> str | None:
    """The subject common name of the client certificate verified in ``transport``'s
    handshake (``client_cert: optional|required``); None without one."""
    certificate = transport.get_extra_info("peercert") if transport is not None else None
    for name in (certificate or {}).get("subject", ()):
        for key, value in name:
            if key == "commonName":
                return str(value)
    return None


def _fingerprint(field: str, cert_file: Path) -> str:
    """SHA-256 of the (first) certificate, as ``openssl x509 -fingerprint -sha256`` shows
    it without colons: what an operator compares to tell which certificate is live."""
    text = cert_file.read_text(encoding="ascii", errors="replace")
    start = text.find(ssl.PEM_HEADER)
    end = text.find(ssl.PEM_FOOTER, start) + len(ssl.PEM_FOOTER)
    try:
        der = ssl.PEM_cert_to_DER_cert(text[start:end])
    except ValueError:
        raise ConfigError(f"{field}.cert_file: {cert_file}: no PEM certificate in it") from None
    return hashlib.sha256(der).hexdigest()


class ReloadableTls:
    """A listener's TLS: :attr:`context` for the socket, :meth:`reload` to re-read the files."""

    def __init__(self, config: TlsConfig, field: str) -> None:
        self.config = config
        self.field = field
        self._seen = self._file_states()
        self._current, self.fingerprint = self._load()
        # The context the socket holds (the first one); each handshake moves to the
        # current one.
        self.context = self._current
        self.context.sni_callback = self._use_current
        self._tasks: set[asyncio.Task[bool]] = set()
        self._reloading = asyncio.Lock()  # SIGHUP and the watcher: one reload at a time
        log.info("%s: certificate sha256 %s", field, self.fingerprint)

    def _use_current(
        self, connection: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext
    ) -> None:
        connection.context = self._current

    async def reload(self) -> bool:
        """Re-read the files (off the event loop); keep the old certificate if they fail."""
        async with self._reloading:
            # Seen before reading: a change while they are read is found by the next poll.
            self._seen = await asyncio.to_thread(self._file_states)
            try:
                context, fingerprint = await asyncio.to_thread(self._load)
            except ConfigError as exc:
                log.error("TLS reload refused, the old certificate keeps serving: %s", exc)
                return False
            self._current, self.fingerprint = context, fingerprint
        log.info("%s reloaded: certificate sha256 %s", self.field, fingerprint)
        return True

    def request_reload(self) -> None:
        """Schedule :meth:`reload` (a SIGHUP handler)."""
        task = asyncio.ensure_future(self.reload())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """Reload when the files change (every ``reload_interval_seconds``) until exit."""
        interval = self.config.reload_interval_seconds
        task = asyncio.create_task(self._watch(interval), name=f"{self.field}-watch")
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _watch(self, interval: float) -> None:
        while interval > 0:
            await asyncio.sleep(interval)
            if await asyncio.to_thread(self._file_states) != self._seen:
                await self.reload()

    def _file_states(self) -> list[FileState | None]:
        return [file_state(path) for _, path in self.config.files()]

    def _load(self) -> tuple[ssl.SSLContext, str]:
        context = server_context(self.config, self.field)
        return context, _fingerprint(self.field, self.config.cert_file)
