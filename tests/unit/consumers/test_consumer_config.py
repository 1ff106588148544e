"""The `consumers:` section: typed, unknown keys fail with file and line; CLI usage errors."""

from __future__ import annotations

import socket
import textwrap

import pytest

from proxy.cli.main import main
from proxy.config.settings import ConfigError, load_config
from proxy.destinations.http.generic import GenericHttpTarget
from proxy.destinations.http.marquez import MarquezTarget

GOOD = """\
kafka:
  bootstrap_servers: 127.0.0.1:9092
consumers:
  to-marquez:
    target:
      kind: marquez
      url: http://marquez:5000
    dedupe:
      enabled: true
      journal: state/marquez.journal
  to-hook:
    topics: [a, b]
    target:
      kind: http
      url: https://hooks.example.com/lineage
      batch_events: 50
      auth: {type: bearer, token_env: HOOK_TOKEN}
"""


def _write(tmp_path, text):
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_consumers_section_loads_typed_with_paths_under_the_config_dir(tmp_path):
    config = load_config(_write(tmp_path, GOOD), environ={})
    marquez, hook = config.consumers["to-marquez"], config.consumers["to-hook"]
    assert isinstance(marquez.target, MarquezTarget) and isinstance(hook.target, GenericHttpTarget)
    assert marquez.target.endpoint() == "http://marquez:5000/api/v1/lineage"
    assert marquez.dedupe.journal == tmp_path / "state" / "marquez.journal"
    assert hook.target.batch_max_events == 50 and hook.topics == ["a", "b"]
    assert marquez.group.session_timeout_ms == 45_000  # production default


@pytest.mark.parametrize(
    ("replace", "by", "line", "says"),
    [
        ("      url: http://marquez:5000", "      urll: http://marquez:5000", 7, "urll"),
        ("      kind: marquez", "      kind: marquis", 5, "marquis"),
        ("      enabled: true", "      enabled: maybe", 9, "enabled"),
    ],
)
def test_config_mistakes_name_file_line_and_key(tmp_path, replace, by, line, says):
    path = _write(tmp_path, GOOD.replace(replace, by))
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    message = str(caught.value)
    assert f"{path}:{line}" in message and says in message


def test_run_consumers_must_name_configured_consumers(tmp_path):
    path = _write(tmp_path, GOOD + "server:\n  run_consumers: [nope]\n")
    with pytest.raises(ConfigError, match="nope"):
        load_config(path, environ={})


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["consume", "nope"], "unknown consumer(s) nope"),
        (["consume"], "--all"),
        (["consume", "to-marquez", "--all"], "--all"),
        (["consume", "to-hook"], "consumers.to-hook: environment variable HOOK_TOKEN is not set"),
    ],
)
def test_consume_usage_errors_exit_2(tmp_path, capsys, monkeypatch, argv, says):
    monkeypatch.delenv("HOOK_TOKEN", raising=False)
    path = _write(tmp_path, GOOD)
    assert main([*argv, "--config", str(path)]) == 2
    assert says in capsys.readouterr().err


def test_consume_refuses_the_embedded_broker(tmp_path, capsys):
    """No serve runs, so no embedded broker listens: exit 2 naming it. The port is bound and
    not listening, so it is this test's alone and refuses connections whatever else runs
    (the fixed default port made this test fail whenever something listened there)."""
    with socket.socket() as reserved:
        reserved.bind(("127.0.0.1", 0))
        port = reserved.getsockname()[1]
        text = GOOD.replace("127.0.0.1:9092", f"embedded\n  embedded_port: {port}")
        assert main(["consume", "--all", "--config", str(_write(tmp_path, text))]) == 2
    assert f"no embedded broker listens on 127.0.0.1:{port}" in capsys.readouterr().err


def test_a_consumer_rejects_max_attempts_because_it_never_gives_up(tmp_path):
    retry = "      url: http://marquez:5000\n      retry: {max_attempts: 8}"
    path = _write(tmp_path, GOOD.replace("      url: http://marquez:5000", retry))
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert "max_attempts" in str(caught.value) and "never gives up" in str(caught.value)


def test_consumer_retry_defaults_never_give_up_and_are_capped_low(tmp_path):
    config = load_config(_write(tmp_path, GOOD), environ={})
    marquez = config.consumers["to-marquez"]
    assert isinstance(marquez.target, MarquezTarget) and marquez.target.retry is not None
    assert marquez.target.retry.max_attempts is None  # until delivered
    assert marquez.circuit_breaker.max_open_seconds <= 5
    assert marquez.target.retry.max_backoff_seconds <= 5
    # A dumped config loads again (as tests and tools round-trip it).
    assert type(config).model_validate(config.model_dump()) == config


def test_a_consumer_target_may_use_the_rules_file_spelling_of_an_http_target(tmp_path):
    wrapped = GOOD.replace(
        "      kind: marquez\n      url: http://marquez:5000",
        "      kind: http\n      target: {kind: marquez, url: http://marquez:5000}",
    )
    direct = load_config(_write(tmp_path, GOOD), environ={}).consumers["to-marquez"]
    config = load_config(_write(tmp_path, wrapped), environ={}).consumers["to-marquez"]
    assert config.target == direct.target and config.target.kind == "marquez"


def test_a_consumer_kafka_target_must_name_its_topic(tmp_path):
    path = _write(
        tmp_path,
        GOOD.replace("      kind: marquez\n      url: http://marquez:5000", "      kind: kafka"),
    )
    with pytest.raises(ConfigError, match="needs the topic"):
        load_config(path, environ={})
