"""Bearer-token authentication and per-token namespace scope.

Tokens are compared in constant time as SHA-256 digests (against every configured token,
so timing does not even reveal which one matched); config may therefore hold a token's
digest (``token_sha256``) instead of the token. A verified client certificate may stand
for a token (``client_cn``). A token's scope is a list of globs per event kind:

* RunEvents and JobEvents: ``job.namespace`` must match ``namespaces`` — a token for
  ``team-a*`` posting a run of ``team-b`` is refused with 403 — and so must the job
  namespaces of the run's parent and root (parent facet): they decide what the run
  attaches to downstream, so a team-a token cannot hang runs under team-b's jobs.
* The datasets a run or job read or wrote: by default not checked (a job reports what it
  touched, wherever that lives); ``run_datasets: outputs`` checks what it wrote, ``all``
  what it read too, against ``dataset_namespaces``.
* DatasetEvents (no job): ``dataset.namespace`` must match ``dataset_namespaces``, which
  defaults to ``namespaces`` — so a ``team-a*`` token cannot post a DatasetEvent for
  ``postgres://db:5432`` unless that namespace is listed there.

A request with two ``Authorization`` headers is refused (400): which one a server or a
proxy in front of it reads differs, so neither is trusted.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from proxy.http_errors import RequestError
from proxy.openlineage.names import Role, named_namespaces
from proxy.secrets import check_one_source, secret_value
from proxy.strict import StrictModel

__all__ = [
    "ANONYMOUS",
    "AuthConfig",
    "Authenticator",
    "Principal",
    "TokenConfig",
    "token_digest",
]

_SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")


class TokenConfig(StrictModel):
    # Who the token belongs to: named in logs and metrics, never the token itself.
    name: str
    # The secret itself, or the name of an environment variable holding it.
    token: SecretStr | None = None
    # Name of an environment variable holding the token (instead of token).
    token_env: str | None = None
    # Or its SHA-256 as 64 hex digits (`lineage-proxy hash-token`): config holds no secret.
    token_sha256: str | None = None
    # Or no token: a request without an Authorization header whose client certificate
    # (verified by server.tls.client_ca_file) has this subject common name.
    client_cn: str | None = None
    # Job namespaces this token may post RunEvents and JobEvents for, as globs; ["*"]
    # allows all.
    namespaces: list[str] = Field(default_factory=lambda: ["*"])
    # Dataset namespaces this token may post DatasetEvents for, as globs; None: the same
    # globs as `namespaces`.
    dataset_namespaces: list[str] | None = None
    # Which datasets of a RunEvent or JobEvent must be in dataset_namespaces too:
    # unchecked (a job reports what it touched, wherever that lives), outputs (what it
    # wrote), all (what it read too).
    run_datasets: Literal["unchecked", "outputs", "all"] = "unchecked"

    @field_validator("token_sha256")
    @classmethod
    def _hex_digest(cls, value: str | None) -> str | None:
        if value is not None and not _SHA256_HEX.fullmatch(value):
            raise ValueError(
                "must be the token's SHA-256 as 64 hex digits "
                "(printf %s TOKEN | lineage-proxy hash-token)"
            )
        return value

    @model_validator(mode="after")
    def _one_source(self) -> TokenConfig:
        check_one_source(
            "token, token_env, token_sha256 or client_cn",
            self.token,
            self.token_env,
            self.token_sha256,
            self.client_cn,
        )
        return self

    def digest(self) -> bytes:
        """The SHA-256 the offered token is compared with (a missing token_env fails)."""
        if self.token_sha256 is not None:
            return bytes.fromhex(self.token_sha256)
        return token_digest(secret_value(self.token, self.token_env))

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
            if token.client_cn is None:
                token.digest()  # a missing token_env fails here, at start
        names = [t.client_cn for t in self.tokens if t.client_cn is not None]
        if len(set(names)) != len(names):
            raise ValueError("two tokens name the same client_cn")
        return self


# Which roles of a namespace (proxy/openlineage/names.py) are checked against which scope,
# per ``run_datasets``.
_JOB_ROLES: frozenset[Role] = frozenset({"job", "parent", "root"})
_DATASET_ROLES: dict[str, frozenset[Role]] = {
    "unchecked": frozenset({"dataset"}),
    "outputs": frozenset({"dataset", "output"}),
    "all": frozenset({"dataset", "output", "input"}),
}


@dataclass(frozen=True, slots=True)
class Principal:
    """Who sent a request and which namespaces they may post for."""

    name: str
    namespaces: tuple[str, ...]
    dataset_namespaces: tuple[str, ...]
    run_datasets: Literal["unchecked", "outputs", "all"] = "unchecked"

    def refusal(self, event: dict[str, Any]) -> tuple[str, str, str] | None:
        """The first namespace ``event`` names outside this scope, as (JSON pointer,
        namespace, the scope's setting), or None when every one is in scope."""
        if "*" in self.namespaces and "*" in self.dataset_namespaces:
            return None  # unrestricted (anonymous, or auth off): nothing to walk
        dataset_roles = _DATASET_ROLES[self.run_datasets]
        for role, pointer, namespace in named_namespaces(event):
            if role in _JOB_ROLES:
                if not _matches(namespace, self.namespaces):
                    return pointer, namespace, "namespaces"
            elif role in dataset_roles and not _matches(namespace, self.dataset_namespaces):
                return pointer, namespace, "dataset_namespaces"
        return None

    def may_post_for(self, namespace: str, *, dataset_event: bool = False) -> bool:
        """Whether a job namespace (or, for a DatasetEvent, a dataset namespace) is in scope."""
        return _matches(namespace, self.dataset_namespaces if dataset_event else self.namespaces)


def _matches(namespace: str, patterns: tuple[str, ...]) -> bool:
    # "*" (every anonymous or unrestricted token) matches anything: no pattern match per
    # event (1.8% of a batch's CPU in the profile).
    return "*" in patterns or any(fnmatchcase(namespace, pattern) for pattern in patterns)


ANONYMOUS = Principal("anonymous", ("*",), ("*",))


def token_digest(token: str) -> bytes:
    """SHA-256 of a token: what is compared (in constant time, equal lengths whatever the
    token's length) and what ``token_sha256`` holds."""
    return hashlib.sha256(token.encode()).digest()


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
