"""``lineage-proxy serve`` refuses a bad ``--port`` or a busy port in one line, exit 2.

Real processes: the option as a user types it, and a port a real socket holds."""

from __future__ import annotations

import socket

import pytest

from tests.support.processes import serve_process

pytestmark = pytest.mark.integration


def _finished(process, timeout: float = 60) -> tuple[int, list[str]]:
    code = process.wait(timeout=timeout)
    return code, process.log().strip().splitlines()


@pytest.mark.parametrize(
    ("port", "reason"),
    [("99999", "less than or equal to 65535"), ("-1", "greater than or equal to 0")],
)
def test_serve_port_out_of_range_is_one_line_naming_the_option_exit_2(broker, port, reason):
    process, _ = serve_process(broker.bootstrap_servers, "--port", port)
    code, lines = _finished(process)
    assert code == 2
    assert lines == [f"lineage-proxy serve: --port {port}: Input should be {reason}"]


def test_serve_on_a_port_in_use_says_so_in_one_line_and_exits_2(broker, topic):
    with socket.create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        process, _ = serve_process(broker.bootstrap_servers, port=port, kafka__topic=topic)
        code, lines = _finished(process)
    assert code == 2
    assert lines[-1] == f"lineage-proxy serve: cannot listen on 127.0.0.1:{port}: address in use"
    assert not any("Traceback" in line for line in lines), "\n".join(lines)


@pytest.mark.parametrize("workers", ["0", "many"])
def test_serve_workers_not_a_count_or_auto_is_one_line_naming_the_option_exit_2(broker, workers):
    process, _ = serve_process(broker.bootstrap_servers, "--workers", workers)
    code, lines = _finished(process)
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith(f"lineage-proxy serve: --workers {workers}: ")
    assert "'auto'" in lines[0]


def test_serve_workers_on_a_port_in_use_says_so_in_one_line_and_exits_2(broker, topic):
    with socket.create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        process, _ = serve_process(
            broker.bootstrap_servers, "--workers", "2", port=port, kafka__topic=topic
        )
        code, lines = _finished(process)
    assert code == 2
    assert lines[-1] == f"lineage-proxy serve: cannot listen on 127.0.0.1:{port}: address in use"
    assert not any("Traceback" in line for line in lines), "\n".join(lines)
