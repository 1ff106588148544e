"""Benchmark: librdkafka's broker threads spinning behind an idempotent producer's window.

Run: ``.venv/bin/python bench/librdkafka_window.py`` (``--rate``, ``--seconds``,
``--rounds``, ``--pause-ms``/``--run-ms``). Prints one JSON document on stdout.

An idempotent librdkafka producer creates a partition's next ProduceRequest only while
fewer than 5 of the partition's messages are in flight; a batch that has lingered
``linger.ms`` but may not be sent then makes the broker thread poll its socket with a
zero timeout until the acknowledgement comes. The cost grows with the time the broker
takes to acknowledge, which is why the proxy paid far more CPU per event on a 3-broker
cluster (acks=all, min.insync.replicas=2) than on the embedded broker (issue 41).

This starts a 3-broker cluster (tests/support/kafka_cluster.py) and makes its
acknowledgements slow on purpose — every broker stopped for ``--pause-ms`` then let run
for ``--run-ms``, over and over (SIGSTOP/SIGCONT of the brokers it started) — then
produces keyed messages at ``--rate`` per second with the proxy's producer settings,
evenly spaced, in two ways, alternately for ``--rounds``: straight to librdkafka
(``direct``) and held back per partition while 5 of its messages are in flight
(``held``, what :mod:`proxy.kafka.producer` does). For each: CPU µs per message by thread
kind (``rdk:broker`` is librdkafka's broker threads).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import threading
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.http_ingest import log, thread_cpu_seconds  # noqa: E402
from proxy.kafka.client_logs import kafka_client_config  # noqa: E402
from proxy.kafka.producer import PARTITION_WINDOW  # noqa: E402
from proxy.kafka.settings import producer_settings  # noqa: E402
from tests.support.kafka_cluster import KafkaCluster  # noqa: E402

PARTITIONS = 3


def slow_acknowledgements(cluster: KafkaCluster, pause: float, run: float) -> threading.Event:
    """Stop and resume every broker of ``cluster`` in turn until the event is set."""
    done = threading.Event()

    def cycle() -> None:
        nodes = [node.node_id for node in cluster.nodes]
        try:
            while not done.is_set():
                for node in nodes:
                    cluster.pause(node)
                time.sleep(pause)
                for node in nodes:
                    cluster.resume(node)
                time.sleep(run)
        finally:
            for node in nodes:
                cluster.resume(node)

    threading.Thread(target=cycle, daemon=True).start()
    return done


def produce(bootstrap: str, topic: str, rate: int, seconds: float, held: bool) -> dict[str, Any]:
    producer = Producer(kafka_client_config(producer_settings(bootstrap)))
    value = os.urandom(1200).hex().encode()  # about the reference event's 2.5 KB
    lock = threading.Lock()
    in_flight = [0] * PARTITIONS
    waiting: list[collections.deque[str]] = [collections.deque() for _ in range(PARTITIONS)]
    delivered = [0]

    def on_delivery(err: Any, msg: Any) -> None:
        delivered[0] += 1
        if not held:
            return
        partition = zlib.crc32(msg.key()) % PARTITIONS
        with lock:
            in_flight[partition] -= 1
            if in_flight[partition] < PARTITION_WINDOW:
                while waiting[partition]:
                    key = waiting[partition].popleft()
                    in_flight[partition] += 1
                    producer.produce(topic, value, key=key, on_delivery=on_delivery)

    def send(key: str) -> None:
        if held:
            partition = zlib.crc32(key.encode()) % PARTITIONS
            with lock:
                if waiting[partition] or in_flight[partition] >= PARTITION_WINDOW:
                    waiting[partition].append(key)
                    return
                in_flight[partition] += 1
        producer.produce(topic, value, key=key, on_delivery=on_delivery)

    running = [True]

    def poll() -> None:
        while running[0]:
            producer.poll(0.05)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    started = time.monotonic()
    warm_until, sent = started + 2, 0
    before: dict[str, float] | None = None
    counted_from = measured_from = 0.0
    while True:
        now = time.monotonic()
        if before is None and now >= warm_until:
            before, counted_from, measured_from = thread_cpu_seconds(os.getpid()), delivered[0], now
        if before is not None and now >= measured_from + seconds:
            break
        sent += 1
        delay = started + sent / rate - now
        if delay > 0:
            time.sleep(delay)
        send(f"run:{uuid.uuid4()}")
    assert before is not None
    after = thread_cpu_seconds(os.getpid())
    messages = max(delivered[0] - counted_from, 1)
    running[0] = False
    poller.join()
    producer.flush(30)
    return {
        "messages_per_s": round(messages / (time.monotonic() - measured_from)),
        "cpu_us_per_message_by_thread": {
            kind: round((cpu - before.get(kind, 0.0)) / messages * 1e6, 1)
            for kind, cpu in sorted(after.items())
            if cpu - before.get(kind, 0.0) > 0
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=1500, help="messages/s (default 1500)")
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pause-ms", type=float, default=15)
    parser.add_argument("--run-ms", type=float, default=15)
    args = parser.parse_args()
    load_average = {"start": os.getloadavg()}
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="librdkafka-window-") as work:
        log("bench: starting a 3-broker Apache Kafka cluster ...")
        cluster = KafkaCluster(Path(work), brokers=3).start()
        try:
            bootstrap = cluster.bootstrap_servers
            topic = f"bench.window.{uuid.uuid4().hex[:8]}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(topic, PARTITIONS)])[topic].result(60)
            produce(bootstrap, topic, 50, 1, held=False)  # the producer id, leaders known
            stop = slow_acknowledgements(cluster, args.pause_ms / 1e3, args.run_ms / 1e3)
            try:
                for round_ in range(args.rounds):
                    for held in (False, True):
                        name = "held" if held else "direct"
                        log(f"bench: round {round_}, {name} ...")
                        result = produce(bootstrap, topic, args.rate, args.seconds, held)
                        runs.append({"round": round_, "mode": name, **result})
            finally:
                stop.set()
        finally:
            cluster.stop()
    load_average["end"] = os.getloadavg()
    broker = {
        mode: [
            r["cpu_us_per_message_by_thread"].get("rdk:broker", 0.0)
            for r in runs
            if r["mode"] == mode
        ]
        for mode in ("direct", "held")
    }
    report = {
        "benchmark": "librdkafka_window",
        "rate": args.rate,
        "pause_ms": args.pause_ms,
        "run_ms": args.run_ms,
        "load_average": load_average,
        "runs": runs,
        "broker_threads_us_per_message": broker,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
