"""Bearer-token authentication and per-token namespace scope.

Tokens are compared in constant time (against every configured token, so timing does
not even reveal which one matched). A token may be limited to job namespaces by glob:
a token for ``team-a*`` posting an event of ``team-b`` is refused with 403.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from fnmatch import fnmatchcase

from proxy.config import AuthConfig
from proxy.http_errors import RequestError

__all__ = ["ANONYMOUS", "Authenticator", "Principal"]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who sent a request and which namespaces they may post for."""

    name: str
    namespaces: tuple[str, ...]

    def may_post_for(self, namespace: str) -> bool:
        return any(fnmatchcase(namespace, pattern) for pattern in self.namespaces)


ANONYMOUS = Principal("anonymous", ("*",))


def _digest(token: str) -> bytes:
    # Hash first so compare_digest sees equal lengths whatever the token's length.
    return hashlib.sha256(token.encode()).digest()


class Authenticator:
    """Maps an ``Authorization`` header to a :class:`Principal`, or raises 401."""

    def __init__(self, config: AuthConfig) -> None:
        self.enabled = config.enabled
        self._tokens = [
            (_digest(t.secret()), Principal(t.name, tuple(t.namespaces))) for t in config.tokens
        ]

    def authenticate(self, authorization: str | None) -> Principal:
        if not self.enabled:
            return ANONYMOUS
        challenge = {"WWW-Authenticate": 'Bearer realm="lineage-proxy"'}
        scheme, _, credentials = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            raise RequestError(
                401, "missing Bearer token", headers=challenge, reason="unauthorized"
            )
        offered = _digest(credentials.strip())
        found: Principal | None = None
        for digest, principal in self._tokens:
            if hmac.compare_digest(offered, digest) and found is None:
                found = principal
        if found is None:
            raise RequestError(401, "invalid token", headers=challenge, reason="unauthorized")
        return found
