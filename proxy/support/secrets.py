"""Secrets in configuration: given literally, or by the name of an environment variable.

Auth tokens of the proxy and credentials of HTTP targets are both written this way
(``token`` or ``token_env``), so a secret need not sit in config.yaml.
"""

from __future__ import annotations

import os

from pydantic import SecretStr

__all__ = ["check_one_source", "secret_value"]


def check_one_source(names: str, *sources: object) -> None:
    """Raise ValueError unless exactly one of ``sources`` (the literal, the variable, …)
    is given."""
    if sum(source is not None for source in sources) != 1:
        raise ValueError(f"give exactly one of {names}")


def secret_value(value: SecretStr | None, env: str | None) -> str:
    """The literal secret, or the environment variable's value (which must be set)."""
    if value is not None:
        return value.get_secret_value()
    secret = os.environ.get(env or "")
    if not secret:
        raise ValueError(f"environment variable {env} is not set")
    return secret
