"""An empty YAML value (``host:``, ``tls:`` with its children commented out) in config
and rules files: taken as null, then refused or accepted by the models with the key's
file and line — never a parser traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from proxy.config.settings import load_config
from proxy.support.yaml_source import ConfigError
from routing_rules.loader import load_rules_file
from tests.support.config_errors import config_refusal


def test_a_section_whose_children_are_commented_out_is_empty(tmp_path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("server:\n  tls:\n  #  cert_file: server.pem\n  port: 5055\n")
    config = load_config(path, environ={})
    assert config.server.tls is None and config.server.port == 5055


def test_an_empty_value_is_refused_with_its_line(tmp_path) -> None:
    path, message = config_refusal(tmp_path, "server:\n  port: 5000\n  host:\n")
    assert message == f"{path}:3: server.host: Input should be a valid string"


def test_an_empty_value_in_a_rules_file_is_refused_with_its_line(tmp_path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("version: 1\ndestinations:\n  k:\n    kind: kafka\ndefault:\n  to:\n")
    with pytest.raises(ConfigError, match=rf"^{path}:6: default.to: "):
        load_rules_file(path)


def test_the_command_line_says_one_line_and_exits_2(tmp_path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("server:\n  tls:\n  host:\n")
    event = tmp_path / "event.json"
    event.write_text("{}")
    done = subprocess.run(
        [sys.executable, "-m", "proxy", "validate", "--config", str(config), str(event)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert f"{config}:3: server.host: Input should be a valid string" in done.stderr.splitlines()
