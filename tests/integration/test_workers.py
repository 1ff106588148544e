"""``lineage-proxy serve --workers 2``: real processes on one port (SO_REUSEPORT).

Both workers take requests, one scrape of /metrics shows both (label ``worker``), SIGHUP
reaches both, SIGTERM to the supervisor drains both and exits 0 — and, the invariant,
every acknowledged event is in Kafka and the archive. A SIGKILLed worker is replaced and
its spool drained by its successor. The in-process consumer runs in the supervisor and
its metrics show in the same scrape (label `worker="supervisor"`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import orjson
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from proxy.destinations.kafka.destination import event_headers
from proxy.destinations.kafka.spool import Spool
from proxy.destinations.kafka.spool_dirs import spool_directory
from proxy.kafka.producer import KafkaProducer
from proxy.openlineage import event_key
from tests.support.brokers import running_broker
from tests.support.figures import report
from tests.support.load import archive_run_ids, compare, kafka_run_ids, post_events
from tests.support.metrics import fetch_metrics
from tests.support.ports import free_port
from tests.support.processes import ServeProcess, serve_process
from tests.support.sample_events import rich_run_event, run_event
from tests.support.waiting import read_eventually, wait_for, wait_until

pytestmark = pytest.mark.integration

Samples = list[tuple[dict[str, str], float]]


def samples(url: str, name: str) -> Samples:
    """The samples named ``name`` in one scrape of ``url``/metrics."""
    text = fetch_metrics(url)
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


def by_worker(found: Samples, **labels: str) -> dict[str, float]:
    totals: dict[str, float] = {}
    for sample_labels, value in found:
        if labels.items() <= sample_labels.items():
            worker = sample_labels["worker"]
            totals[worker] = totals.get(worker, 0.0) + value
    return totals


def accepted_events(url: str, at_least: int) -> bool:
    """Whether the workers together accepted ``at_least`` events so far."""
    with contextlib.suppress(requests.ConnectionError):
        return sum(by_worker(samples(url, "lineage_proxy_events_accepted_total")).values()) >= (
            at_least
        )
    return False


def worker_pids(url: str) -> dict[str, str]:
    """worker → pid of the workers that answered the scrape."""
    return {
        labels["worker"]: labels["pid"]
        for labels, up in samples(url, "lineage_proxy_worker_up")
        if up == 1
    }


def two_workers(bootstrap: str, topic: str, archive: Path) -> tuple[ServeProcess, str]:
    """``serve --workers 2`` writing to ``topic`` and archiving under ``archive``."""
    return serve_process(
        bootstrap,
        "--workers",
        "2",
        kafka__topic=topic,
        routing__archive_root=str(archive),
        server__run_consumers="[]",
    )


def wait_until_both_listen(url: str, process: ServeProcess) -> None:
    """Until both workers listen: one that is ready early would take every connection."""

    def listening(i: int) -> bool:  # in the text log format or the JSON one
        return any(
            "lineage-proxy listening" in line
            and (f"[worker-{i}]" in line or f'"process":"worker-{i}"' in line)
            for line in process.log().splitlines()
        )

    wait_until(lambda: listening(0) and listening(1), 60, "both workers", alive=process)


@pytest.mark.slow
async def test_two_workers_share_the_port_report_together_reload_and_drain_on_sigterm(
    broker, topic, tmp_path: Path
):
    process, url = two_workers(broker.bootstrap_servers, topic, tmp_path)
    try:
        await asyncio.to_thread(wait_until_both_listen, url, process)
        # Every new connection is a fresh draw of the kernel's SO_REUSEPORT hash.
        first = await post_events(url, (rich_run_event() for _ in range(400)), concurrency=32)
        requests_by_worker = by_worker(
            samples(url, "lineage_proxy_http_requests_total"), endpoint="lineage"
        )
        accepted_by_worker = by_worker(samples(url, "lineage_proxy_events_accepted_total"))
        pids = worker_pids(url)

        process.send_signal(signal.SIGHUP)
        wait_until(
            lambda: (
                by_worker(samples(url, "lineage_proxy_rules_reloads_total"), result="success")
                == {"0": 1.0, "1": 1.0}
            ),
            30,
            "a reload in each worker",
            alive=process,
            ignoring=requests.ConnectionError,
        )

        # SIGTERM in the middle of a load: what was acknowledged before must land.
        more = (rich_run_event() for _ in range(3000))
        second_load = asyncio.create_task(post_events(url, more, concurrency=32))
        # SIGTERM once the load is surely under way: a sixth of it accepted (a condition,
        # not a time, so a fast machine cannot finish the load before the signal).
        await wait_for(
            lambda: asyncio.to_thread(accepted_events, url, at_least=400 + 500),
            60,
            "the second load under way",
            alive=process,
        )
        process.send_signal(signal.SIGTERM)
        second = await second_load
        exit_code = await asyncio.to_thread(process.wait, 60)
    finally:
        if process.poll() is None:
            process.kill()
    acknowledged = first.acknowledged + second.acknowledged
    kafka = compare(acknowledged, kafka_run_ids(broker.bootstrap_servers, topic))
    archive = compare(acknowledged, archive_run_ids(tmp_path / "events"))
    archive_files = [p.name for p in (tmp_path / "events").rglob("*") if p.is_file()]
    report(
        "two_workers_sigterm_mid_load",
        sent=first.sent + second.sent,
        acknowledged=kafka["acknowledged"],
        requests_by_worker=requests_by_worker,
        found=kafka["found"],
        lost=kafka["lost"],
        duplicates=kafka["duplicates"],
        archive_lost=archive["lost"],
        exit_code=exit_code,
    )
    assert first.statuses == {200: 400}
    assert set(requests_by_worker) == {"0", "1"} and min(requests_by_worker.values()) > 0
    assert sum(requests_by_worker.values()) == 400  # one scrape: every worker's count
    assert sum(accepted_by_worker.values()) == 400
    assert len(set(pids.values())) == 2 and str(process.pid) not in pids.values()
    # Both workers wrote archive files, each named with its own pid.
    assert all(any(pid in name for name in archive_files) for pid in pids.values())
    assert second.acknowledged and len(second.acknowledged) < 3000
    assert exit_code == 0, process.log()
    log = process.log()
    assert (
        "[worker-0] proxy.server.serve: stopped" in log
        and "[worker-1] proxy.server.serve: stopped" in log
    )
    assert kafka["lost"] == 0 and archive["lost"] == 0


@pytest.mark.slow
async def test_sigkilled_worker_is_replaced_and_its_spooled_events_reach_kafka(topic):
    port = free_port()  # the broker comes up on it only after the kill
    process, url = serve_process(
        f"127.0.0.1:{port}",
        "--workers",
        "2",
        kafka__topic=topic,
        kafka__spool__after_seconds="0.5",
        # Creating topics would wait for the absent broker at every worker start; the
        # test creates its topic once the broker is up.
        kafka__create_topics="false",
        server__run_consumers="[]",
    )
    try:
        await asyncio.to_thread(wait_until_both_listen, url, process)
        events = [run_event(name=f"job-{i % 20}") for i in range(300)]
        load = await post_events(url, events, concurrency=32)
        spooled = by_worker(samples(url, "lineage_proxy_spool_events"))
        killed_pid = worker_pids(url)["1"]
        os.kill(int(killed_pid), signal.SIGKILL)
        wait_until(
            lambda: worker_pids(url).get("1") not in (None, killed_pid),
            60,
            "worker 1 replaced",
            alive=process,
            ignoring=requests.ConnectionError,
        )
        with running_broker(port) as broker:
            KafkaProducer({"bootstrap.servers": broker.bootstrap_servers}).ensure_topics(
                {topic: (3, 1)}
            )
            wait_until(
                lambda: (
                    set(by_worker(samples(url, "lineage_proxy_spool_events")).values()) == {0.0}
                ),
                60,
                "both spools drained",
                alive=process,
                ignoring=requests.ConnectionError,
            )
            found = kafka_run_ids(broker.bootstrap_servers, topic)
            process.send_signal(signal.SIGTERM)
            exit_code = await asyncio.to_thread(process.wait, 60)
    finally:
        if process.poll() is None:
            process.kill()
    figures = report(
        "worker_sigkilled_while_spooling",
        sent=load.sent,
        spooled_by_worker=spooled,
        exit_code=exit_code,
        **compare(load.acknowledged, found),
    )
    assert load.statuses == {200: 300}
    assert spooled.get("1", 0) > 0, "worker 1 had nothing spooled: the kill proves nothing"
    assert f"worker 1 (pid {killed_pid}) died" in process.log()
    assert figures["lost"] == 0
    assert exit_code == 0, process.log()


async def test_spool_left_by_a_run_with_more_workers_is_drained_to_kafka_at_start(
    start_proxy, broker, topic, tmp_path: Path
):
    # Worker 3 of an earlier `--workers 4` run spooled these and never drained them.
    events = [run_event(name=f"job-{i % 5}") for i in range(50)]
    orphan = Spool(
        spool_directory(tmp_path / "worker-3", broker.bootstrap_servers, broker.bootstrap_servers),
        1 << 30,
        1 << 20,
    )
    await orphan.open()
    for event in events:
        await orphan.append(topic, event_key(event), event_headers(event), orjson.dumps(event))
    await orphan.close()
    spooled = [event["run"]["runId"] for event in events]
    async with start_proxy(kafka={"spool": {"directory": tmp_path}}):
        found = await read_eventually(
            lambda: asyncio.to_thread(kafka_run_ids, broker.bootstrap_servers, topic),
            lambda found: set(spooled) <= set(found),
            within=60,
            interval=0.5,
        )
    figures = report("orphaned_worker_spool_drained", **compare(spooled, found))
    assert figures["lost"] == 0


def test_workers_that_cannot_start_stop_the_supervisor_with_their_exit_code(broker, tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\nrules: [{name: x, to: [nowhere]}]\n")
    process, _ = serve_process(
        broker.bootstrap_servers,
        "--workers",
        "2",
        routing__rules=str(rules),
        server__run_consumers="[]",
    )
    code = process.wait(timeout=120)
    log = process.log()
    assert code == 2, log
    assert "configuration error" in log and "failed to start (exit code 2)" in log
    assert "died" not in log  # not restarted: it would fail the same way again


def consumer_delivered(url: str) -> float:
    """The archive consumer's delivered count in one scrape, from the supervisor's series."""
    found = samples(url, "lineage_consumer_delivered_total")
    assert all(labels["worker"] == "supervisor" for labels, _ in found), found
    return by_worker(found, consumer="archive").get("supervisor", 0.0)


def status_of(url: str) -> dict:
    return requests.get(f"{url}/api/v1/status", timeout=10).json()


def _children(pid: int) -> list[str]:
    """Command lines of ``pid``'s child processes."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode())
    return found


@pytest.mark.slow
async def test_two_workers_share_one_embedded_broker_and_one_archive_consumer(tmp_path: Path):
    consumed = tmp_path / "consumed"
    process, url = serve_process(
        "embedded",
        "--workers",
        "2",
        routing__archive_root=str(tmp_path / "archive"),
        consumers__archive__target__directory=str(consumed),
        logging__json_format="true",
        kafka__embedded_port=str(free_port()),  # not the fixed default: tests run side by side
    )
    try:
        await asyncio.to_thread(wait_until_both_listen, url, process)
        load = await post_events(url, (run_event() for _ in range(200)), concurrency=16)
        children = _children(process.pid)
        await wait_for(
            lambda: set(archive_run_ids(consumed)) == set(load.acknowledged),
            60,
            "every acknowledged event in the archive",
            alive=process,
        )

        # The consumer runs in the supervisor; a scrape through the port shows its figures.
        async def all_delivered() -> bool:
            return await asyncio.to_thread(consumer_delivered, url) >= load.sent

        await wait_for(all_delivered, 60, "the consumer's delivered count", alive=process)
        # ... and so does the status page, for the whole proxy (two workers listed).
        status = await read_eventually(
            lambda: asyncio.to_thread(status_of, url),
            lambda status: bool(status["consumers"]),
            within=60,
        )
        assert status["consumers"], (status, process.log())
        process.send_signal(signal.SIGTERM)
        exit_code = await asyncio.to_thread(process.wait, 60)
    finally:
        if process.poll() is None:
            process.kill()
    log = process.log()
    # Every stderr line is JSON: the supervisor's, the workers', librdkafka's, Tansu's.
    assert all(orjson.loads(line) for line in log.splitlines()), log
    assert [c["name"] for c in status["consumers"]] == ["archive"], status
    assert status["consumers"][0]["circuit_open"] is False, status
    assert sorted(w["worker"] for w in status["workers"]) == [0, 1], status
    figures = report(
        "two_workers_embedded_broker_archive_consumer",
        sent=load.sent,
        **compare(load.acknowledged, archive_run_ids(consumed)),
    )
    assert load.statuses == {200: 200}
    assert sum("tansu" in command for command in children) == 1
    assert log.count("embedded Kafka-protocol broker (Tansu) on") == 1
    assert log.count("consumer archive: openlineage.events → archive") == 1
    assert figures["lost"] == 0 and figures["duplicates"] == 0
    assert exit_code == 0, log
