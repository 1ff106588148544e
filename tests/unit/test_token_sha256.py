"""Auth tokens given as their SHA-256 (``token_sha256``), so config.yaml holds no secret;
``lineage-proxy hash-token`` prints the digest of a token read from stdin."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest

from proxy.auth.authenticator import Authenticator
from proxy.auth.config import AuthConfig
from proxy.cli.main import main
from proxy.support.request_errors import RequestError
from tests.support.config_errors import config_refusal

DIGEST = hashlib.sha256(b"s3cret").hexdigest()
ONE_OF = "4: auth.tokens.0: Value error, give exactly one of token, token_env, token_sha256 or"


def test_a_token_given_by_its_digest_authenticates_as_its_name():
    auth = AuthConfig.model_validate(
        {"enabled": True, "tokens": [{"name": "team-a", "token_sha256": DIGEST.upper()}]}
    )
    authenticator = Authenticator(auth)
    assert authenticator.authenticate("Bearer s3cret").name == "team-a"
    with pytest.raises(RequestError):
        authenticator.authenticate(f"Bearer {DIGEST}")


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ({"token_sha256": DIGEST[:-1]}, "5: auth.tokens.0.token_sha256: Value error, must be"),
        ({"token_sha256": "g" * 64}, "5: auth.tokens.0.token_sha256: Value error, must be"),
        ({"token_sha256": DIGEST, "token": "s3cret"}, ONE_OF),
        ({}, ONE_OF),
    ],
)
def test_a_bad_token_sha256_fails_at_start_naming_the_field(
    tmp_path: Path, token: dict[str, str], message: str
):
    fields = "".join(f"\n      {key}: {value!r}" for key, value in token.items())
    config, refused = config_refusal(
        tmp_path, f"auth:\n  enabled: true\n  tokens:\n    - name: team-a{fields}\n"
    )
    assert f"{config}:{message}" in refused


def test_hash_token_prints_the_digest_of_the_token_on_stdin(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret\n"))
    assert main(["hash-token"]) == 0
    assert capsys.readouterr().out == f"{DIGEST}\n"


def test_hash_token_without_a_token_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    assert main(["hash-token"]) == 2
    assert "no token on stdin" in capsys.readouterr().err
