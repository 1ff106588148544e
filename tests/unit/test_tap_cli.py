"""``lineage-proxy tap``'s exit codes and one-line errors, and its text format."""

from __future__ import annotations

import socket

import pytest

from proxy.cli import main
from proxy.tap.client import format_text


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--limit", "0"], "--limit 0: must be at least 1"),
        (["--url", "ftp://proxy"], "--url 'ftp://proxy': give http://host:port"),
        (["--token-env", "TAP_TEST_UNSET"], "--token-env TAP_TEST_UNSET: the variable is not set"),
    ],
)
def test_tap_usage_errors_are_one_line_and_exit_2(capsys, monkeypatch, args, says):
    monkeypatch.delenv("TAP_TEST_UNSET", raising=False)
    assert main(["tap", *args]) == 2
    assert capsys.readouterr().err.splitlines() == [f"lineage-proxy tap: {says}"]


def test_tap_against_a_proxy_that_is_not_there_is_one_line_and_exit_1(capsys):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        assert main(["tap", "--url", f"http://127.0.0.1:{port}", "--limit", "1"]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"lineage-proxy tap: cannot reach the proxy at http://127.0.0.1:{port}")


def test_text_format_says_when_what_which_run_rules_and_destinations():
    record = {
        "time": "2026-11-23T17:40:01.123Z",
        "rules": ["team-a"],
        "destinations": ["kafka", "archive"],
        "dropped_by": None,
        "event": {
            "eventType": "COMPLETE",
            "run": {"runId": "0193"},
            "job": {"namespace": "team-a", "name": "etl.daily"},
        },
    }
    assert format_text(record) == (
        "2026-11-23T17:40:01.123Z COMPLETE team-a/etl.daily run=0193 rules=team-a -> kafka, archive"
    )
    dropped = {**record, "rules": ["no-running"], "destinations": [], "dropped_by": "no-running"}
    assert format_text(dropped).endswith("rules=no-running -> dropped by no-running")
