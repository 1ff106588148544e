"""Benchmark: the consumer daemon's events/s into a fast HTTP receiver, beside references.

Run: ``.venv/bin/python bench/consumer_throughput.py`` (``--events``, ``--batch-size``,
``--rounds``, ``--py-spy DIR`` to record profiles of the first round). Prints one JSON document on
stdout; progress goes to stderr. N keyed events (the rich reference RunEvent, 64 runs) are
produced once to a 6-partition topic on an embedded broker; each scenario then reads all
of them from the start and delivers them to the ``parse`` reference server (bare aiohttp:
parse JSON, answer 200), run as its own process. Figures that matter are ratios to
references measured in the same run (absolute figures on a shared machine drift):

- ``raw_consume``: a bare librdkafka consumer reading the N messages and doing nothing —
  the Kafka read ceiling;
- ``naive_poster``: a loop that reads the same topic (librdkafka on a thread) and POSTs
  each event (or arrays of them) with one keep-alive aiohttp session and the same
  concurrency — no order, no retries, no commits: the Kafka → HTTP ceiling;
- ``daemon``: ``lineage-proxy consume`` (a separate process) with the generic ``http``
  target: ordered lanes per run key, retries, breaker, commits, metrics.

``ordered`` runs the same pairs with the daemon in acknowledgement order (``ordering:
acknowledged``, Marquez's default): partitions merged by the proxy's order stamp (each
event carries one, as the proxy writes it), events that name a common run, job or dataset
one after another. Each of the 64 runs reads and writes datasets of its own, as distinct
pipelines do; ``ordered_vs_single`` is its ``daemon_vs_naive_poster`` over the lanes'
(``single``): each scenario against the naive poster of its own rounds.

``archive`` runs the daemon with an ``archive`` target (fsynced JSON Lines under a
scratch folder) over the same N events: its peak RSS is the buffering bound at work
(the whole topic is behind when it starts). Beside it, in the same run and alternated
with it (``--rounds`` pairs), the daemon with an ``object_archive`` target writing the
same events to a real S3-compatible server (S3Proxy over a scratch folder, started as in
the tests; ``scripts/s3.sh`` fetches it): once as documented
(docs/consumers/object-storage.md: ``batch_events`` 500, objects finished after 10 s)
and once with objects finished after 1 s. A delivery to the bucket is acknowledged only
when its object is complete, so the rate of both archives is taken from the partition
assignment to the last delivery (``object_vs_local_archive``: the median ratio of the
pairs).

``single`` posts one event per request (the target ratio is ``daemon_vs_naive_poster``),
``batch`` posts arrays of ``--batch-size``; each runs ``--rounds`` naive/daemon pairs and
reports the median ratio. On a shared machine events/s move with the
neighbours' load; ``cpu_us_per_event`` (CPU time of the process per event delivered) moves
much less and says where the cost is. The daemon's rate and CPU are taken between its first
and last delivery (from its own ``/metrics``), so the group join is not counted. Latency is
the target round trip from ``lineage_consumer_target_seconds`` (bucket upper bounds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
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

from bench.http_ingest import log, peak_rss_mib, record_profile, wait_http  # noqa: E402
from proxy.kafka.order_stamp import ORDER_HEADER, next_stamp  # noqa: E402
from proxy.server.embedded_broker import EmbeddedBroker, free_port  # noqa: E402
from tests.support.sample_events import rich_run_event  # noqa: E402

TOPIC, PARTITIONS, RUNS, CONCURRENCY = "bench.consumer", 6, 64, 16


def produce_events(bootstrap: str, count: int) -> list[bytes]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    payloads = []
    for i in range(count):
        event = rich_run_event()
        event["job"]["name"] = f"job{i % RUNS}"
        for dataset in (*event["inputs"], *event["outputs"]):
            dataset["name"] = f"{dataset['name']}_{i % RUNS}"  # each pipeline its own data
        payload = orjson.dumps(event)
        payloads.append(payload)
        while True:
            try:
                producer.produce(
                    TOPIC,
                    payload,
                    key=f"run:bench/job{i % RUNS}",
                    headers=[(ORDER_HEADER, str(next_stamp()).encode())],
                )
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


async def naive_post(bootstrap: str, url: str, count: int, batch: int) -> dict[str, Any]:
    """Read the topic on a thread, hand bodies to the loop, POST them with CONCURRENCY
    workers: the least a Kafka → HTTP forwarder has to do."""
    loop = asyncio.get_running_loop()
    bodies: asyncio.Queue[bytes | None] = asyncio.Queue()

    def hand_over(chunk: list[bytes | None]) -> None:
        for body in chunk:
            bodies.put_nowait(body)

    def read() -> None:
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "bench-naive", "enable.auto.commit": False}
        )
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        seen, events = 0, list[bytes]()
        while seen < count:
            while bodies.qsize() > 2000:  # read ahead a little, like the daemon
                time.sleep(0.005)
            chunk: list[bytes | None] = []
            for message in consumer.consume(500, 1.0):
                if message.error() is None:
                    seen += 1
                    events.append(message.value() or b"")
                    if len(events) == batch or seen == count:
                        chunk.append(b"[" + b",".join(events) + b"]" if batch > 1 else events[0])
                        events = []
            loop.call_soon_threadsafe(hand_over, chunk)
        consumer.close()
        ends: list[bytes | None] = [None] * CONCURRENCY
        loop.call_soon_threadsafe(hand_over, ends)

    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession() as session:

        async def worker() -> None:
            while (body := await bodies.get()) is not None:
                async with session.post(url, data=body, headers=headers) as resp:
                    await resp.read()
                    resp.raise_for_status()

        started, cpu = time.perf_counter(), time.process_time()
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        reader.join()
    return {
        "events_per_s": round(count / elapsed, 1),
        "cpu_us_per_event": round(cpu / count * 1e6, 1),
    }


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    return _cpu_seconds_of(Path(f"/proc/{pid}/stat"))


def _cpu_seconds_of(stat: Path) -> float:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def http_target(receiver: str, batch: int) -> dict[str, Any]:
    target: dict[str, Any] = {"kind": "http", "url": receiver}
    if batch > 1:
        target["batch_events"] = batch
    return target


def run_daemon(
    work: Path,
    bootstrap: str,
    target: dict[str, Any],
    count: int,
    label: str,
    profile: Path | None = None,
    *,
    from_assignment: bool = False,
    ordering: str = "run",
) -> dict[str, Any]:
    """The daemon's figures from its first delivery to its last (``from_assignment``:
    from the moment it holds partitions, for targets that acknowledge late)."""
    log(f"bench: daemon/{label} ...")
    status = free_port()
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
                        "ordering": ordering,
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
    assigned = 'lineage_consumer_assigned_partitions{consumer="bench"}'
    spy: subprocess.Popen[bytes] | None = None
    try:
        wait_http(metrics_url, process)
        if profile is not None:
            spy = record_profile(process.pid, profile / f"daemon-{label}")
        first: tuple[float, float, float] | None = None
        last: tuple[float, float] | None = None  # (time, delivered) of the scrape before
        while True:
            values = _metrics(metrics_url)
            done = values.get(delivered, 0.0)
            now, cpu = time.perf_counter(), _cpu_seconds(process.pid)
            started = values.get(assigned, 0.0) > 0 if from_assignment else done > 0
            if first is None and started:
                first, threads = (now, cpu, done), _cpu_by_thread(process.pid)
            if done >= count:
                break
            if first is not None:
                last = (now, done)
            if process.poll() is not None:
                raise RuntimeError("consumer exited early")
            # A scrape costs the daemon CPU: often only until the first delivery is seen.
            time.sleep(0.02 if first is None else 0.25)
        rss = peak_rss_mib(process.pid)
        threads = {
            name: seconds - threads.get(name, 0.0)
            for name, seconds in _cpu_by_thread(process.pid).items()
        }
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its profile on SIGINT
            spy.wait(timeout=60)
        process.terminate()
        process.wait(timeout=60)
    assert first is not None
    # The last events landed somewhere between the last two scrapes (0.25 s apart: a
    # batch run lasts well under a second): at the pace seen until the scrape before, not
    # at the scrape that saw them, which would charge up to 0.25 s of waiting to the daemon.
    end = now
    if last is not None and last[1] > first[2]:
        pace = (last[1] - first[2]) / (last[0] - first[0])
        end = min(now, last[0] + (count - last[1]) / pace)
    rate = (count - first[2]) / max(end - first[0], 1e-9)
    return {
        "events_per_s": round(rate, 1),
        "cpu_us_per_event": round((cpu - first[1]) / max(count - first[2], 1) * 1e6, 1),
        "target_p50_ms_le": _bucket_percentile(values, 0.5),
        "target_p99_ms_le": _bucket_percentile(values, 0.99),
        "peak_rss_mib": rss,
        "cpu_share_by_thread": {
            name: round(seconds / max(cpu - first[1], 1e-9), 3)
            for name, seconds in sorted(threads.items(), key=lambda item: -item[1])
            if seconds > 0
        },
    }


def _cpu_by_thread(pid: int) -> dict[str, float]:
    """CPU seconds of each thread of ``pid``, by thread name (librdkafka names its own;
    Python threads are all called after the interpreter), the main thread as "main"."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            seconds = _cpu_seconds_of(task / "stat")
        except OSError:
            continue
        key = "main" if task.name == str(pid) else name
        out[key] = out.get(key, 0.0) + seconds
    return out


def compare_archives(work: Path, bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    """``args.rounds`` rounds of the local archive, then the object archive as documented
    and with objects finished after 1 s, against S3Proxy on this machine."""
    from tests.support.s3_server import (
        BUCKET,
        S3Server,
        object_archive_target,
        s3_credentials,
    )

    os.environ.update(s3_credentials())  # the daemons inherit them
    server = S3Server(work / "s3")
    log("bench: starting S3Proxy ...")
    server.start()
    try:
        server.client().create_bucket(Bucket=BUCKET)
        variants: dict[str, list[dict[str, Any]]] = {}
        for n in range(args.rounds):
            targets = {
                "archive": {"kind": "archive", "directory": str(work / f"archive{n}")},
                # As in the documentation's example (no gzip, to compare like with like).
                "object_archive": object_archive_target(
                    server, f"bench{n}", batch_events=500, max_file_age_seconds=10
                ),
                "object_archive_1s": object_archive_target(
                    server, f"bench1s{n}", batch_events=500, max_file_age_seconds=1
                ),
            }
            for label, target in targets.items():
                figures = run_daemon(
                    work, bootstrap, target, args.events, f"{label}{n}", from_assignment=True
                )
                variants.setdefault(label, []).append(figures)
    finally:
        server.stop()

    def median_ratio(label: str) -> float:
        pairs = zip(variants[label], variants["archive"], strict=True)
        ratios = sorted(o["events_per_s"] / a["events_per_s"] for o, a in pairs)
        return round(ratios[len(ratios) // 2], 3)

    return {
        **variants,
        "ratios": {
            "object_vs_local_archive": median_ratio("object_archive"),
            "object_1s_vs_local_archive": median_ratio("object_archive_1s"),
        },
    }


def compare(
    work: Path,
    bootstrap: str,
    url: str,
    args: argparse.Namespace,
    label: str,
    batch: int,
    raw: dict[str, Any],
    ordering: str = "run",
) -> dict[str, Any]:
    """``args.rounds`` rounds of naive poster then daemon; the median of each round's
    ratio (neighbours' load moves both runs of a round alike, rounds apart)."""
    rounds = []
    for n in range(args.rounds):
        log(f"bench: naive_poster/{label} ({n + 1}/{args.rounds}) ...")
        spy = None
        if args.py_spy is not None and n == 0:
            spy = record_profile(os.getpid(), args.py_spy / f"naive-{label}")
        try:
            naive = asyncio.run(naive_post(bootstrap, url, args.events, batch))
        finally:
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(timeout=60)
        profile = args.py_spy if n == 0 else None
        target = http_target(url, batch)
        daemon = run_daemon(
            work, bootstrap, target, args.events, f"{label}{n}", profile, ordering=ordering
        )
        rounds.append((naive, daemon))

    def median_ratio(figure: str) -> float:
        ratios = sorted(d[figure] / n[figure] for n, d in rounds)
        return round(ratios[len(ratios) // 2], 3)

    return {
        "naive_poster": [n for n, _ in rounds],
        "daemon": [d for _, d in rounds],
        "ratios": {
            "daemon_vs_naive_poster": median_ratio("events_per_s"),
            "daemon_vs_naive_poster_cpu_per_event": median_ratio("cpu_us_per_event"),
            "daemon_vs_raw_consume": round(
                statistics.median(d["events_per_s"] for _, d in rounds) / raw["events_per_s"], 3
            ),
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3, help="naive/daemon pairs per mode")
    parser.add_argument("--py-spy", type=Path, help="record each daemon run into this folder")
    parser.add_argument(
        "--scenarios",
        default="single,ordered,batch,archive",
        help="comma-separated: single, ordered (acknowledgement order), batch, archive "
        "(local archive beside object storage)",
    )
    args = parser.parse_args()
    scenarios = set(args.scenarios.split(","))
    if args.py_spy is not None:
        args.py_spy.mkdir(parents=True, exist_ok=True)
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
            for label, batch, ordering in (
                ("single", 1, "run"),
                ("ordered", 1, "acknowledged"),
                ("batch", args.batch_size, "run"),
            ):
                if label in scenarios:
                    results[label] = compare(
                        work, bootstrap, url, args, label, batch, raw, ordering
                    )
            if {"single", "ordered"} <= results.keys():
                # Each against the naive poster of its own rounds: the machine's load moves
                # between the two scenarios, not within a round.
                lanes, ordered = (
                    results[k]["ratios"]["daemon_vs_naive_poster"] for k in ("single", "ordered")
                )
                results["ordered"]["ratios"]["ordered_vs_single"] = round(ordered / lanes, 3)
            results["raw_consume"] = raw
            if "archive" in scenarios:
                # The whole topic behind: what the buffering bound holds the process to.
                results["archive"] = compare_archives(work, bootstrap, args)
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
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "results": results,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
