"""A wrong Kafka address is one throttled line in our log format, not librdkafka's
twenty raw lines a second; the cluster coming up is one line too."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

import orjson
import pytest
from confluent_kafka import Producer

from proxy.kafka.client_logs import kafka_client_config
from tests.support.brokers import running_broker
from tests.support.ports import free_port
from tests.support.processes import serve_process
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

# Loggers that speak for the Kafka clients (librdkafka's own lines, the cluster log).
KAFKA_LOGGERS = ("librdkafka", "proxy.kafka", "proxy.destinations.kafka")


@pytest.mark.slow
def test_proxy_at_a_closed_port_logs_one_json_line_about_kafka_not_a_flood() -> None:
    closed = f"127.0.0.1:{free_port()}"
    process, _ = serve_process(closed, logging__json_format="true")
    try:
        # Until the line is there; that no flood follows is proven with a marker by the
        # next test (a process's reconnect attempts cannot be counted from outside).
        wait_until(lambda: "cannot reach Kafka" in process.log(), 60, "the line", alive=process)
    finally:
        # Killed: a clean stop is not under test here, and with Kafka unreachable it
        # would wait out the producer's flush. Each log line is written whole (stderr is
        # line-buffered), so what the log holds is what was said.
        process.kill()
        process.wait(timeout=60)
    lines = process.log().splitlines()
    entries = [orjson.loads(line) for line in lines]  # every line JSON, librdkafka's too
    kafka = [e for e in entries if e["logger"].startswith(KAFKA_LOGGERS)]
    assert 1 <= len(kafka) <= 3, lines
    said = [e["message"] for e in kafka if "cannot reach Kafka" in e["message"]]
    # librdkafka's own reason, whose "after N ms" is however long the refusal took.
    reason = (
        rf"Connect to ipv4#{re.escape(closed)} failed: "
        r"Connection refused \(after \d+ms in state CONNECT\)"
    )
    assert len(said) == 1, said
    assert re.fullmatch(rf"cannot reach Kafka at {re.escape(closed)}: {reason}", said[0]), said
    for entry in entries:  # no "...: " with nothing after it, whoever logged it
        assert not entry["message"].rstrip().endswith(":"), entry


def test_a_cluster_that_comes_up_is_reported_reachable_again_once(caplog) -> None:
    caplog.set_level(logging.INFO, logger="proxy.kafka.client_logs")
    port = free_port()
    servers = f"127.0.0.1:{port}"
    errors: list[object] = []  # every error librdkafka reported, after the cluster log saw it
    # Short reconnect backoff and statistics period: the test is about how many lines,
    # not about librdkafka's default pace (backoff up to 10 s, statistics every 5 s).
    settings = {
        "bootstrap.servers": servers,
        "reconnect.backoff.max.ms": 500,
        "statistics.interval.ms": 500,
    }
    producer = Producer(kafka_client_config(settings, errors.append))

    def messages() -> list[str]:
        return [r.getMessage() for r in caplog.records if servers in r.getMessage()]

    def poll_until(done: Callable[[], bool], seconds: float, what: str) -> None:
        """Serve the producer's callbacks (its errors, statistics) until ``done``."""

        def polled() -> bool:
            producer.poll(0.1)
            return done()

        wait_until(polled, seconds, what)

    poll_until(lambda: len(messages()) >= 1, 20, "the cluster log's first line")
    # The marker: three more failed attempts reported to the cluster log after its line,
    # each of which could have been a line of its own.
    seen = len(errors)
    poll_until(lambda: len(errors) >= seen + 3, 60, "three more failed attempts")
    assert [m.split(":")[0] for m in messages()] == ["cannot reach Kafka at 127.0.0.1"]
    with running_broker(port):
        # librdkafka's reconnect backoff plus one statistics period, with room to spare.
        poll_until(lambda: len(messages()) >= 2, 60, "a line once the cluster is up")
    assert len(messages()) == 2
    assert messages()[1].startswith(f"Kafka at {servers} reachable again")
