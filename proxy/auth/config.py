"""The ``auth`` section of config.yaml: the accepted tokens and what each may post.

Config may hold a token's SHA-256 (``token_sha256``, from ``lineage-proxy hash-token``)
instead of the token, or the name of an environment variable holding it; a verified client
certificate's common name may stand for a token (``client_cn``). What a scope allows is
said in :mod:`proxy.auth.principal`.
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from proxy.support.secrets import check_one_source, secret_value
from proxy.support.strict import StrictModel

__all__ = ["AuthConfig", "TokenConfig", "token_digest"]

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


def token_digest(token: str) -> bytes:
    """SHA-256 of a token: what is compared (in constant time, equal lengths whatever the
    token's length) and what ``token_sha256`` holds."""
    return hashlib.sha256(token.encode()).digest()
