"""librdkafka's logs and errors reach our logger throttled: one line per outage of a
cluster, one when it is back, never an empty reason."""

from __future__ import annotations

import logging
import re

import orjson
import pytest

from proxy.kafka.client_logs import ClusterLog, failure_reason, kafka_client_config
from tests.support.paths import REPO

REFUSED = (
    "[thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 "
    "failed: Connection refused (after 0ms in state CONNECT)"
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeError:
    """What librdkafka's error_cb hands over (confluent_kafka.KafkaError's methods)."""

    def __init__(self, code: int, text: str, name: str = "_TRANSPORT") -> None:
        self._code, self._text, self._name = code, text, name

    def code(self) -> int:
        return self._code

    def name(self) -> str:
        return self._name

    def str(self) -> str:
        return self._text


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records]


def _fail(cluster: ClusterLog) -> None:
    cluster.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-1", REFUSED)
    cluster.error(FakeError(-195, REFUSED.partition("]: ")[2]))
    cluster.error(FakeError(-187, "1/1 brokers are down", "_ALL_BROKERS_DOWN"))


def test_an_outage_is_one_line_then_one_a_minute_then_one_when_back(caplog) -> None:
    caplog.set_level(logging.INFO)
    clock = Clock()
    cluster = ClusterLog("127.0.0.1:1", clock=clock)
    for _ in range(500):  # what ~20 s of reconnect attempts of a few clients look like
        _fail(cluster)
        clock.now += 0.05
    assert _lines(caplog) == [
        "cannot reach Kafka at 127.0.0.1:1: Connect to ipv4#127.0.0.1:1 failed: "
        "Connection refused (after 0ms in state CONNECT)"
    ]
    clock.now += 45
    _fail(cluster)
    assert len(caplog.records) == 2
    assert _lines(caplog)[1].startswith("still cannot reach Kafka at 127.0.0.1:1 after 70 s")
    cluster.stats(orjson.dumps({"brokers": {"b/1": {"state": "UP", "rx": 3}}}).decode())
    cluster.stats(orjson.dumps({"brokers": {"b/1": {"state": "UP", "rx": 5}}}).decode())
    assert _lines(caplog)[2:] == ["Kafka at 127.0.0.1:1 reachable again (after 70 s)"]
    _fail(cluster)  # a new outage is news again
    assert _lines(caplog)[3].startswith("cannot reach Kafka at 127.0.0.1:1:")


def test_one_broker_down_while_the_others_answer_is_no_outage_and_one_line_a_minute(
    caplog,
) -> None:
    clock = Clock()
    cluster = ClusterLog("b1:9092,b2:9092,b3:9092", clock=clock)
    refused = "b2:9092/2: Connect to ipv4#10.0.0.2:9092 failed: Connection refused"
    for _ in range(1800):  # 90 s of reconnect attempts to broker 2
        cluster.error(FakeError(-195, refused))
        clock.now += 0.05
    line = (
        "a broker of Kafka at b1:9092,b2:9092,b3:9092 keeps failing: "
        "Connect to ipv4#10.0.0.2:9092 failed: Connection refused"
    )
    # After the 10 s grace, then a minute later with the count of attempts in between.
    assert _lines(caplog) == [line, f"{line} (1200 more like it in the last 60 s)"]
    assert cluster.unreachable_since is None
    clock.now += 600  # it came back; ten minutes later another broker restarts briefly
    for _ in range(100):  # 5 s: within the grace period, nothing to say
        cluster.error(FakeError(-195, refused))
        clock.now += 0.05
    assert len(caplog.records) == 2


def test_statistics_without_a_connected_broker_end_no_outage(caplog) -> None:
    caplog.set_level(logging.INFO)
    cluster = ClusterLog("b:9092", clock=Clock())
    _fail(cluster)
    cluster.stats(orjson.dumps({"brokers": {"b:9092/bootstrap": {"state": "INIT"}}}).decode())
    cluster.stats("not json")
    assert len(caplog.records) == 1 and cluster.unreachable_since is not None


def test_a_connected_broker_that_answers_nothing_ends_no_outage(caplog) -> None:
    """A frozen broker (SIGSTOP): its kernel accepts the connection, librdkafka may show
    it UP, but no response arrives — that is not "reachable again"."""
    caplog.set_level(logging.INFO)
    cluster = ClusterLog("b:9092", clock=Clock())
    cluster.stats(orjson.dumps({"brokers": {"b:9092/1": {"state": "UP", "rx": 40}}}).decode())
    _fail(cluster)
    for _ in range(4):
        cluster.stats(orjson.dumps({"brokers": {"b:9092/1": {"state": "UP", "rx": 40}}}).decode())
    assert len(caplog.records) == 1 and cluster.unreachable_since is not None
    cluster.stats(orjson.dumps({"brokers": {"b:9092/1": {"state": "UP", "rx": 41}}}).decode())
    assert _lines(caplog)[1].startswith("Kafka at b:9092 reachable again")


def test_answers_are_counted_per_client_from_its_first_report(caplog) -> None:
    """Clients of one cluster name its brokers alike: with the counts kept per broker
    name, a client's count after another's lower one read as an answer, and "reachable
    again" was logged while the broker was frozen (seen once readiness checks made an
    admin client of their own). A client's first report is its baseline: it may count
    answers from before the outage."""
    caplog.set_level(logging.INFO)
    cluster = ClusterLog("b:9092", clock=Clock())

    def report(client: str, rx: int) -> None:
        document = {"name": client, "brokers": {"b:9092/1": {"state": "UP", "rx": rx}}}
        cluster.stats(orjson.dumps(document).decode())

    report("producer-1", 40)
    _fail(cluster)
    report("admin-2", 3)
    report("producer-1", 40)
    report("watcher-3", 57)  # new: its answers came before the outage
    report("admin-2", 3)
    assert len(caplog.records) == 1 and cluster.unreachable_since is not None
    report("admin-2", 4)
    assert _lines(caplog)[1].startswith("Kafka at b:9092 reachable again")


def test_no_line_has_an_empty_reason(caplog) -> None:
    cluster = ClusterLog("b:9092", clock=Clock())
    cluster.error(FakeError(-187, "", "_ALL_BROKERS_DOWN"))
    cluster.error(FakeError(-172, "", "_STATE"))
    assert _lines(caplog) == [
        "cannot reach Kafka at b:9092: _ALL_BROKERS_DOWN",
        "Kafka error: _STATE",
    ]
    assert failure_reason(TimeoutError()) == "Kafka did not answer in time"
    assert failure_reason(RuntimeError()) == "RuntimeError"


def test_other_librdkafka_lines_are_throttled_per_kind_with_a_count(caplog) -> None:
    clock = Clock()
    cluster = ClusterLog("b:9092", clock=clock)
    for _ in range(10):
        cluster.log(logging.WARNING, "%s [%s] %s", "THROTTLE", "rdkafka#producer-1", "slow")
        cluster.log(logging.WARNING, "%s [%s] %s", "REQTMOUT", "rdkafka#producer-1", "late")
    clock.now += 61
    cluster.log(logging.WARNING, "%s [%s] %s", "THROTTLE", "rdkafka#producer-1", "slow")
    assert [r.name for r in caplog.records] == ["librdkafka"] * 3
    assert _lines(caplog)[2].endswith("slow (9 more like it in the last 60 s)")


def test_client_config_chains_the_clients_own_error_callback() -> None:
    seen: list[object] = []
    config = kafka_client_config({"bootstrap.servers": "chained:9092"}, seen.append)
    error = FakeError(-187, "1/1 brokers are down", "_ALL_BROKERS_DOWN")
    config["error_cb"](error)
    assert seen == [error]
    assert config["logger"].unreachable_since is not None  # the cluster's log heard it too
    assert config["statistics.interval.ms"] > 0


def test_every_librdkafka_client_is_built_with_the_cluster_log() -> None:
    # A client built from bare settings would print raw librdkafka lines to stderr again.
    built = re.compile(r"\b(?:Producer|Consumer|AdminClient)\(\s*([^)\n]*)")
    for package in ("proxy", "consumers"):
        for path in (REPO / package).rglob("*.py"):
            for match in built.finditer(path.read_text()):
                assert match.group(1).startswith("kafka_client_config("), (path, match.group(0))


AUTH_FAILED = (
    "SASL authentication error: Authentication failed during authentication due to "
    "invalid credentials with SASL mechanism SCRAM-SHA-512 (after 387ms in state AUTH_REQ)"
)


def _refused(cluster: ClusterLog) -> None:
    """One refused login as librdkafka reports it: a FAIL log line, then the error."""
    text = f"[thrd:sasl_ssl://k:9096/bootstrap]: sasl_ssl://k:9096/bootstrap: {AUTH_FAILED}"
    cluster.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-1", text)
    cluster.error(FakeError(-169, AUTH_FAILED, "_AUTHENTICATION"))
    cluster.error(FakeError(-187, "1/1 brokers are down", "_ALL_BROKERS_DOWN"))


def test_refused_credentials_are_one_line_saying_what_to_check_until_a_broker_answers(
    caplog,
) -> None:
    caplog.set_level(logging.INFO)
    clock = Clock()
    cluster = ClusterLog("k:9096", clock=clock)
    for _ in range(100):  # ~40 s of logins refused every 0.4 s
        _refused(cluster)
        clock.now += 0.4
    [line] = _lines(caplog)
    assert line == f"cannot reach Kafka at k:9096: authentication refused: {AUTH_FAILED}; " + (
        "check sasl.username and sasl.password (or sasl.password_env) under kafka.producer, "
        "sasl.mechanisms, and that the user exists on the cluster"
    )
    assert cluster.authentication_error == AUTH_FAILED
    clock.now += 60
    _refused(cluster)  # a minute on: one "still" line, saying what to check again
    assert len(_lines(caplog)) == 2 and _lines(caplog)[1].endswith(line.split("; ", 1)[1])
    assert cluster.failures >= 100  # every attempt counted, for the metric
    cluster.stats(orjson.dumps({"brokers": {"b/1": {"state": "UP", "rx": 3}}}).decode())
    cluster.stats(orjson.dumps({"brokers": {"b/1": {"state": "UP", "rx": 4}}}).decode())
    assert cluster.authentication_error is None  # let in: readiness stops saying it


def test_a_timed_out_version_request_says_what_a_timeout_means(caplog) -> None:
    """librdkafka guesses "broker version < 0.10" for any ApiVersionRequest that timed
    out; seen with a frozen broker (SIGSTOP), where it misleads. Seen failing with the
    text passed on as librdkafka wrote it."""
    clock = Clock()
    cluster = ClusterLog("b:9092", clock=clock)
    text = (
        "[thrd:GroupCoordinator]: GroupCoordinator: b:9092: ApiVersionRequest failed: "
        "Local: Timed out: probably due to broker version < 0.10 (see api.version.request "
        "configuration)"
    )
    for _ in range(3):
        cluster.log(logging.WARNING, "%s [%s] %s", "FAIL", "rdkafka#consumer-1", text)
        clock.now += 31
    [line] = _lines(caplog)
    assert "0.10" not in line and "api.version.request" not in line
    assert line.endswith(
        "ApiVersionRequest failed: Local: Timed out: the broker accepted the connection but "
        "did not answer in time (frozen, overloaded, or its disk stalled)"
    )
