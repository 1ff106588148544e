"""Benchmark: the consumer daemon's events/s into a fast HTTP receiver, beside references.

Run: ``.venv/bin/python bench/consumer_throughput.py`` (``--events``, ``--batch-size``).
Prints one JSON document on stdout; progress goes to stderr. N keyed events (the rich
reference RunEvent, 64 runs) are produced once to a 6-partition topic on an embedded
broker; each scenario then reads all of them from the start in a fresh consumer group and
delivers them to the ``parse`` reference server (bare aiohttp: parse JSON, answer 200),
run as its own process. Figures that matter are ratios to references measured in the same
run (DESIGN.md §7):

- ``raw_consume``: a bare librdkafka consumer reading the N messages and doing nothing —
  the Kafka read ceiling;
- ``naive_poster``: aiohttp posting the N events (or arrays of them) to the receiver with
  the same concurrency, no Kafka, no ordering, no retries — the HTTP delivery ceiling;
- ``daemon``: ``lineage-proxy consume`` (a separate process) with the generic ``http``
  target: ordered lanes per run key, retries, commits, metrics.

The daemon's rate is taken from its own ``/metrics`` between its first and last delivery,
so the group join is not counted. Latency is the target round trip from
``lineage_consumer_target_seconds`` (bucket upper bounds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import requests
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.http_ingest import log, peak_rss_mib, wait_http  # noqa: E402
from proxy.embedded_broker import EmbeddedBroker, free_port  # noqa: E402
from tests.sample_events import rich_run_event  # noqa: E402

TOPIC, PARTITIONS, RUNS, CONCURRENCY = "bench.consumer", 6, 64, 16


def produce_events(bootstrap: str, count: int) -> list[bytes]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    payloads = []
    for i in range(count):
        event = rich_run_event()
        event["job"]["name"] = f"job{i % RUNS}"
        payload = orjson.dumps(event)
        payloads.append(payload)
        while True:
            try:
                producer.produce(TOPIC, payload, key=f"run:bench/job{i % RUNS}")
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(60):
        raise RuntimeError("events not produced")
    return payloads


def raw_consume(bootstrap: str, count: int) -> dict[str, Any]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-raw", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen, started = 0, time.perf_counter()
    while seen < count:
        seen += sum(1 for m in consumer.consume(1000, 1.0) if m.error() is None)
    elapsed = time.perf_counter() - started
    consumer.close()
    return {"events_per_s": round(count / elapsed, 1)}


async def naive_post(url: str, payloads: list[bytes], batch: int) -> dict[str, Any]:
    bodies = [
        b"[" + b",".join(payloads[i : i + batch]) + b"]" if batch > 1 else payloads[i]
        for i in range(0, len(payloads), batch)
    ]
    queue = list(reversed(bodies))
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession() as session:

        async def worker() -> None:
            while queue:
                async with session.post(url, data=queue.pop(), headers=headers) as resp:
                    await resp.read()
                    resp.raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        elapsed = time.perf_counter() - started
    return {"events_per_s": round(len(payloads) / elapsed, 1)}


def _metrics(url: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for line in requests.get(url, timeout=5).text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def _bucket_percentile(values: dict[str, float], quantile: float) -> float | None:
    prefix = "lineage_consumer_target_seconds_bucket{"
    buckets = sorted(
        (float(name.split('le="')[1].split('"')[0]), count)
        for name, count in values.items()
        if name.startswith(prefix)
    )
    total = buckets[-1][1] if buckets else 0
    for bound, count in buckets:
        if total and count >= quantile * total:
            return round(bound * 1000, 3)
    return None


def run_daemon(
    work: Path, bootstrap: str, receiver: str, count: int, batch: int, label: str
) -> dict[str, Any]:
    log(f"bench: daemon/{label} ...")
    status = free_port()
    target: dict[str, Any] = {"kind": "http", "url": receiver}
    if batch > 1:
        target["batch_events"] = batch
    config = work / f"{label}.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "kafka": {"bootstrap_servers": bootstrap, "create_topics": False},
                "logging": {"level": "WARNING"},
                "consumers": {
                    "bench": {
                        "target": target,
                        "topics": [TOPIC],
                        "group_id": f"bench-{label}",
                        "concurrency": CONCURRENCY,
                        "group": {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500},
                        "dead_letter": {"enabled": False},
                        "status_port": status,
                    }
                },
            }
        )
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "consume", "bench", "--config", str(config)], cwd=REPO
    )
    metrics_url = f"http://127.0.0.1:{status}/metrics"
    delivered = 'lineage_consumer_delivered_total{consumer="bench"}'
    try:
        wait_http(metrics_url, process)
        first: tuple[float, float] | None = None
        while True:
            values = _metrics(metrics_url)
            done = values.get(delivered, 0.0)
            now = time.perf_counter()
            if first is None and done > 0:
                first = (now, done)
            if done >= count:
                break
            if process.poll() is not None:
                raise RuntimeError("consumer exited early")
            time.sleep(0.02)
        rss = peak_rss_mib(process.pid)
    finally:
        process.terminate()
        process.wait(timeout=60)
    assert first is not None
    rate = (count - first[1]) / max(now - first[0], 1e-9)
    return {
        "events_per_s": round(rate, 1),
        "target_p50_ms_le": _bucket_percentile(values, 0.5),
        "target_p99_ms_le": _bucket_percentile(values, 0.99),
        "peak_rss_mib": rss,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=100)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lineage-bench-consumer-"))
    results: dict[str, Any] = {}
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        log(f"bench: producing {args.events} events ...")
        payloads = produce_events(bootstrap, args.events)
        port = free_port()
        reference = str(REPO / "bench" / "reference_servers.py")
        receiver = subprocess.Popen([sys.executable, reference, "parse", "--port", str(port)])
        try:
            url = f"http://127.0.0.1:{port}/api/v1/lineage"
            wait_http(url, receiver)
            log("bench: raw_consume ...")
            raw = raw_consume(bootstrap, args.events)
            for label, batch in (("single", 1), ("batch", args.batch_size)):
                log(f"bench: naive_poster/{label} ...")
                naive = asyncio.run(naive_post(url, payloads, batch))
                daemon = run_daemon(work, bootstrap, url, args.events, batch, label)
                results[label] = {
                    "naive_poster": naive,
                    "daemon": daemon,
                    "ratios": {
                        "daemon_vs_naive_poster": round(
                            daemon["events_per_s"] / naive["events_per_s"], 3
                        ),
                        "daemon_vs_raw_consume": round(
                            daemon["events_per_s"] / raw["events_per_s"], 3
                        ),
                    },
                }
            results["raw_consume"] = raw
        finally:
            receiver.terminate()
            receiver.wait(timeout=30)
    report = {
        "benchmark": "consumer_throughput",
        "events": args.events,
        "event_bytes": len(payloads[0]),
        "partitions": PARTITIONS,
        "run_keys": RUNS,
        "concurrency": CONCURRENCY,
        "batch_size": args.batch_size,
        "cpus": os.cpu_count(),
        "results": results,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
