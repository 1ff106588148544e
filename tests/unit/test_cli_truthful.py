"""The CLI tells the truth in one line, on stderr, and a reader leaving is no error:
``config check``, "did you mean" for unknown keys, one line for a bad regex, no
BrokenPipe traceback under ``| head`` (issue 37, item 7)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.cli import cli_process
from tests.support.paths import REPO


def test_config_check_validates_config_rules_and_consumer_credentials_without_starting(
    tmp_path: Path,
):
    """Seen failing before ``config check`` existed (argparse: invalid choice, exit 2)."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "version: 1\ndestinations:\n  k: {kind: kafka}\nrules: []\ndefault: {to: [k]}\n"
    )
    config = tmp_path / "config.yaml"
    config.write_text(
        f"routing:\n  rules: {rules}\n"
        "consumers:\n  m:\n    target:\n      kind: marquez\n      url: http://marquez:5000\n"
        "      auth: {type: bearer, token_env: LP_TEST_MARQUEZ_TOKEN}\n"
    )
    env = {"LP_TEST_MARQUEZ_TOKEN": "t"}
    ok = cli_process("config", "check", "--config", str(config), env=env)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == (
        f"{config}: ok (rules {rules}: 0 rules, 1 destinations; consumers: m)"
    )
    unset = cli_process(
        "config", "check", "--config", str(config), env={"LP_TEST_MARQUEZ_TOKEN": ""}
    )
    assert unset.returncode == 1 and unset.stdout == ""
    assert unset.stderr.strip() == (
        f"{config}: consumers.m.target.auth: environment variable LP_TEST_MARQUEZ_TOKEN is not set"
    )
    rules.write_text(rules.read_text().replace("to: [k]", "to: [kk]"))
    broken = cli_process("config", "check", "--config", str(config), env=env)
    assert broken.returncode == 1 and "kk" in broken.stderr and "Traceback" not in broken.stderr


def test_an_unknown_key_names_the_closest_known_one(tmp_path: Path):
    """Seen failing with the old message ("check the spelling; see config.yaml ...")."""
    config = tmp_path / "config.yaml"
    config.write_text(
        "server:\n  hots: 0.0.0.0\nconsumers:\n  m:\n    target: {kind: marquez, url: http://m}\n"
        "    reorder_windw_seconds: 1\n"
    )
    result = cli_process("config", "check", "--config", str(config))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"{config}:2: server.hots: unknown key (did you mean 'host'?)",
        f"{config}:6: consumers.m.reorder_windw_seconds: unknown key "
        "(did you mean 'reorder_window_seconds'?)",
    ]


def test_a_bad_regex_in_a_rule_is_one_line_on_stderr(tmp_path: Path):
    """A union (string, {regex}, {glob}, list) reported why each branch failed: four
    lines, three of them misleading ("should be a valid string", "glob: Field
    required", ...). Seen failing with every branch's errors kept."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "version: 1\ndestinations:\n  k: {kind: kafka}\nrules:\n  - name: r\n"
        '    match: {job_name: {regex: "a(b"}}\n    to: [k]\ndefault: {to: [k]}\n'
    )
    result = cli_process("rules", "check", str(rules))
    assert result.returncode == 1 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{rules}:6: rules.0.match.job_name.regex: ")
    assert "invalid regular expression: missing )" in line


def test_output_cut_short_by_its_reader_is_no_error():
    """``lineage-proxy schema config | head -c 10``: seen failing with a BrokenPipeError
    traceback and exit 1."""
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "schema", "config"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.read(10)
    process.stdout.close()  # the reader leaves with most of the schema unread
    error = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0, error
    assert error == ""
