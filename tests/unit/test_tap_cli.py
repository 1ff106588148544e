"""``lineage-proxy tap``'s exit codes and one-line errors, and its text format."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

import pytest

from proxy.cli.main import main
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


def test_tap_cut_off_mid_stream_is_one_line_and_exit_1(capsys):
    # Seen failing (a ClientPayloadError traceback, no exit code) with
    # aiohttp.ClientPayloadError left out of the client's except clause.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]

        def proxy_that_cuts_off() -> None:
            connection, _ = server.accept()
            connection.recv(65536)
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\nc\r\n: tap open\n\n\r\n"
            )
            connection.settimeout(0.3)
            with contextlib.suppress(TimeoutError):
                connection.recv(1)  # a moment for the client to read the opening
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            connection.close()

        thread = threading.Thread(target=proxy_that_cuts_off)
        thread.start()
        try:
            assert main(["tap", "--url", f"http://127.0.0.1:{port}"]) == 1
        finally:
            thread.join(30)
    watching, broke_off = capsys.readouterr().err.splitlines()
    assert watching.startswith("lineage-proxy tap: watching")
    assert broke_off.startswith("lineage-proxy tap: the stream broke off"), broke_off


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
