"""From credentials to a :class:`~proxy.auth.principal.Principal`: a bearer token, compared
in constant time as a SHA-256 digest against every configured token (so timing does not
even reveal which one matched), or a verified client certificate's common name.

Reading them off a request is the web layer's part (:mod:`proxy.web.principal`).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from proxy.auth.config import AuthConfig, token_digest
from proxy.auth.principal import ANONYMOUS, Principal
from proxy.support.request_errors import RequestError

__all__ = ["Authenticator"]


class Authenticator:
    """Maps an ``Authorization`` header (or, without one, a client certificate's common
    name) to a :class:`Principal`, or raises 401."""

    def __init__(self, config: AuthConfig) -> None:
        self.enabled = config.enabled
        self._tokens: list[tuple[bytes, Principal]] = []
        self._client_names: dict[str, Principal] = {}
        for token in config.tokens:
            principal = Principal(
                token.name, tuple(token.namespaces), token.dataset_scope(), token.run_datasets
            )
            if token.client_cn is not None:
                self._client_names[token.client_cn] = principal
            else:
                self._tokens.append((token.digest(), principal))

    def authenticate(
        self, authorization: str | None, client_name: Callable[[], str | None] | None = None
    ) -> Principal:
        """``client_name`` gives the verified client certificate's common name; it is
        asked only when there is no ``Authorization`` header and a token names one."""
        if not self.enabled:
            return ANONYMOUS
        if not authorization and client_name is not None and self._client_names:
            by_certificate = self._client_names.get(client_name() or "")
            if by_certificate is not None:
                return by_certificate
        challenge = {"WWW-Authenticate": 'Bearer realm="lineage-proxy"'}
        scheme, _, credentials = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            raise RequestError(
                401, "missing Bearer token", headers=challenge, reason="unauthorized"
            )
        offered = token_digest(credentials.strip())
        found: Principal | None = None
        for digest, principal in self._tokens:
            if hmac.compare_digest(offered, digest) and found is None:
                found = principal
        if found is None:
            raise RequestError(401, "invalid token", headers=challenge, reason="unauthorized")
        return found
