"""Bearer-token authentication and per-token namespace scope.

Tokens are compared in constant time (against every configured token, so timing does
not even reveal which one matched). A token's scope is a list of globs per event kind:

* RunEvents and JobEvents: ``job.namespace`` must match ``namespaces`` — a token for
  ``team-a*`` posting a run of ``team-b`` is refused with 403. The datasets a run read
  or wrote are not checked: a job reports what it touched, wherever that lives.
* DatasetEvents (no job): ``dataset.namespace`` must match ``dataset_namespaces``, which
  defaults to ``namespaces`` — so a ``team-a*`` token cannot post a DatasetEvent for
  ``postgres://db:5432`` unless that namespace is listed there.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from fnmatch import fnmatchcase

from pydantic import Field, SecretStr, model_validator

from proxy.http_errors import RequestError
from proxy.secrets import check_one_source, secret_value
from proxy.strict import StrictModel

__all__ = ["ANONYMOUS", "AuthConfig", "Authenticator", "Principal", "TokenConfig"]


class TokenConfig(StrictModel):
    # Who the token belongs to: named in logs and metrics, never the token itself.
    name: str
    # The secret itself, or the name of an environment variable holding it.
    token: SecretStr | None = None
    # Name of an environment variable holding the token (instead of token).
    token_env: str | None = None
    # Job namespaces this token may post RunEvents and JobEvents for, as globs; ["*"]
    # allows all.
    namespaces: list[str] = Field(default_factory=lambda: ["*"])
    # Dataset namespaces this token may post DatasetEvents for, as globs; None: the same
    # globs as `namespaces`.
    dataset_namespaces: list[str] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> TokenConfig:
        check_one_source(self.token, self.token_env, "token or token_env")
        return self

    def secret(self) -> str:
        return secret_value(self.token, self.token_env)

    def dataset_scope(self) -> tuple[str, ...]:
        """Globs for DatasetEvents' namespaces."""
        return tuple(
            self.namespaces if self.dataset_namespaces is None else self.dataset_namespaces
        )


class AuthConfig(StrictModel):
    # Require Authorization: Bearer <token> on the lineage endpoints (401/403
    # otherwise).
    enabled: bool = False
    # The accepted tokens and what each may post.
    tokens: list[TokenConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _tokens_when_enabled(self) -> AuthConfig:
        if self.enabled and not self.tokens:
            raise ValueError("auth is enabled but no tokens are configured")
        for token in self.tokens if self.enabled else []:
            token.secret()  # a missing token_env fails here, at start
        return self


@dataclass(frozen=True, slots=True)
class Principal:
    """Who sent a request and which namespaces they may post for."""

    name: str
    namespaces: tuple[str, ...]
    dataset_namespaces: tuple[str, ...]

    def may_post_for(self, namespace: str, *, dataset_event: bool = False) -> bool:
        """Whether a job namespace (or, for a DatasetEvent, a dataset namespace) is in scope."""
        patterns = self.dataset_namespaces if dataset_event else self.namespaces
        return any(fnmatchcase(namespace, pattern) for pattern in patterns)


ANONYMOUS = Principal("anonymous", ("*",), ("*",))


def _digest(token: str) -> bytes:
    # Hash first so compare_digest sees equal lengths whatever the token's length.
    return hashlib.sha256(token.encode()).digest()


class Authenticator:
    """Maps an ``Authorization`` header to a :class:`Principal`, or raises 401."""

    def __init__(self, config: AuthConfig) -> None:
        self.enabled = config.enabled
        self._tokens = [
            (_digest(t.secret()), Principal(t.name, tuple(t.namespaces), t.dataset_scope()))
            for t in config.tokens
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
