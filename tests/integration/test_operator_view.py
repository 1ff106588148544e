"""What an operator sees of a real ``lineage-proxy serve`` with JSON logs and the
default in-process consumer: log lines with their context fields, and one /metrics with
the proxy's build, its rules' last load and the consumer's own figures."""

from __future__ import annotations

import signal

import orjson
import pytest
import requests

from proxy import __version__
from tests.support.consumers import create_topic
from tests.support.metrics import sample
from tests.support.processes import serve_process, wait_until_ready
from tests.support.sample_events import run_event
from tests.support.waiting import read_until

pytestmark = pytest.mark.integration


def test_json_logs_carry_context_and_metrics_include_the_in_process_consumer(broker, topic):
    # The topic exists before the consumer subscribes: one that subscribes to a missing
    # topic may not see it until librdkafka's next metadata refresh (minutes).
    create_topic(broker.bootstrap_servers, topic, 3)
    process, url = serve_process(
        broker.bootstrap_servers, kafka__topic=topic, logging__json_format="true"
    )
    try:
        wait_until_ready(url, process)
        bad = run_event()
        bad["eventTime"] = "yesterday"
        refused = requests.post(
            f"{url}/api/v1/lineage", json=bad, headers={"X-Request-Id": "op-view-1"}, timeout=10
        )
        assert refused.status_code == 400 and refused.json()["request_id"] == "op-view-1"
        assert requests.post(f"{url}/api/v1/lineage", json=run_event(), timeout=10).ok

        def delivered_with_lag(metrics: str) -> bool:
            delivered = sample(metrics, "lineage_consumer_delivered_total", consumer="archive")
            lag = sample(metrics, "lineage_consumer_lag", consumer="archive", topic=topic)
            return bool(delivered) and lag is not None

        # The default consumer (archive) delivers the event, reports its lag.
        metrics = read_until(
            lambda: requests.get(f"{url}/metrics", timeout=10).text,
            delivered_with_lag,
            within=60,
            interval=0.2,
        )
        delivered = sample(metrics, "lineage_consumer_delivered_total", consumer="archive")
        lag = sample(metrics, "lineage_consumer_lag", consumer="archive", topic=topic)
        assert delivered is not None and delivered >= 1, metrics
        assert lag is not None, metrics
        assert sample(metrics, "lineage_consumer_circuit_open", consumer="archive") == 0
        assert sample(metrics, "lineage_proxy_build_info", version=__version__) == 1
        assert sample(metrics, "lineage_proxy_rules_last_reload_success") == 1
        assert (sample(metrics, "lineage_proxy_rules_last_reload_timestamp_seconds") or 0) > 0
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    # Every stderr line is JSON, librdkafka's too (none of its raw "%6|…|BGQUEUE|" lines).
    raw = process.log().splitlines()
    assert not [line for line in raw if not line.startswith("{")], process.log()
    lines = [orjson.loads(line) for line in raw]
    refusal = [line for line in lines if line["message"].startswith("refused 400")]
    assert refusal and refusal[0]["request_id"] == "op-view-1"
    consumer = [line for line in lines if line.get("consumer") == "archive"]
    assert any(line["message"].startswith("consumer archive: ") for line in consumer)
    assert all(line["destination"] == "archive" for line in consumer)
    started = [line for line in lines if "listening on" in line["message"]]
    assert started and "consumer" not in started[0] and "request_id" not in started[0]
