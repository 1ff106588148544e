"""Benchmark: events/s, latency and RSS of the proxy beside its references, in one run.

Run: ``scripts/bench.sh`` (or ``.venv/bin/python bench/http_ingest.py``). Prints one JSON
document on stdout; progress goes to stderr. Every figure that matters is a ratio to a
reference measured in the same run on the same machine, because absolute
numbers on a shared 2-core machine are noise:

- ``parse_200``: bare aiohttp, parse JSON, answer 200 — the ceiling.
- ``naive_forwarder``: parse and produce to Kafka without waiting — the old Java proxy.
- ``durable_forwarder``: parse, produce with acks=all + idempotence, 200 after the
  delivery reports, no validation — what waiting for Kafka costs by itself.
- ``proxy``: lineage-proxy with the default config: validation, key, acks=all, 2xx after
  the delivery report.
- Ingest scenarios (each the proxy beside the three references): ``single`` at
  ``--connections`` (32, latency-bound), ``single_c128`` (CPU-bound), ``batch`` (of
  ``--batch-size``, 100) and ``batch_1000``, both at 8 connections. Every request gets
  fresh runIds and one of 100 job names (a wrk Lua ``request`` function), so Kafka keys
  and archive lines vary like real traffic. Issue 17's targets: ``single_c128``
  proxy_vs_parse_200 ≥ 0.6 and proxy_vs_durable_forwarder ≥ 0.75; ``single`` p99 ≤ 25 ms;
  ``batch`` proxy_vs_parse_200 ≥ 0.5, ``batch_1000`` no worse per event.
- ``routing``: the proxy routing single events by a rules file of 1 rule against one of
  100 rules whose 100th is the one that matches (both to Kafka only); the issue asks for
  ``hundred_vs_one_rule`` ≥ 0.9. ``bench/routing_rules.py`` measures routing alone.
- ``repairs``: the same valid event through the proxy with repairs on (the default) and
  off (``validation.mode: strict``) — ``valid_with_vs_without_repairs`` should be ≈ 1,
  repairs run only after validation failed — and an event with a naive ``eventTime``
  that gets repaired (``repaired_vs_valid``: what a repair costs when it does run).
- ``workers``: the proxy with ``--workers 1`` and ``--workers 2`` at c=128 — ``two_vs_one_worker``
  is the scaling (on a 2-core machine wrk shares the cores, so expect well below 2).
- ``stages``: where a single event's CPU goes at c=128: bare aiohttp, the proxy cut short
  after its own HTTP layer and after validation (``bench/proxy_stages.py``), with each
  default destination alone, and whole; each stage's added CPU µs per event.
- ``rss``: the proxy as shipped (default config, the archive consumer in-process) and the
  proxy alone, each under c=256 for 60 s, RSS of all its processes sampled every second:
  max, first vs last 10 s and the slope (the target: ≤ 200 MB and flat).

``--quick`` shortens every phase (a smoke run: the figures mean little).

Kafka: ``--kafka embedded`` (the default) is the quick start's embedded broker (Tansu,
one process, memory only); ``--kafka cluster`` starts a 3-broker Apache Kafka cluster
(KRaft, replication factor 3, ``min.insync.replicas=2``, tests/support/kafka_cluster.py)
for the run and stops it after; ``--bootstrap host:port`` uses a cluster that is already
running. ``--kafka embedded,cluster`` runs every chosen scenario on each in turn, in one
run, and adds ``across_kafka``: each server's events/s on the cluster over the embedded
broker's (the proxy's and the durable forwarder's are the ones that wait for Kafka;
``parse_200`` never touches it, so its ratio shows how much the machine's load moved
between the two halves of the run).

Each server's CPU time per event (all its threads, from /proc) is reported too, and
``cpu_ratios`` compare it (reference's / proxy's): on a shared, overloaded machine the
throughput ratios swing with the neighbours' load, CPU per event much less.

Load comes from ``wrk`` (a separate C process) so the load generator is not the limit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import orjson
import requests
from confluent_kafka import Producer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from proxy.server.embedded_broker import EmbeddedBroker, free_port  # noqa: E402
from tests.support.kafka_cluster import KafkaCluster  # noqa: E402
from tests.support.sample_events import rich_run_event  # noqa: E402

WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
local body = f:read("*a")
f:close()
wrk.body = body
-- Every request gets fresh runIds and one of 100 job names, so that Kafka keys,
-- partitions and archive lines vary like real traffic.
FRESH_REQUEST
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"socket_errors":%d,"non_2xx":%d,"p50_us":%d,"p99_us":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99)))
end
"""

FRESH_REQUEST = """
math.randomseed(os.time() + math.floor(os.clock() * 1e6))
local prefix = string.format("%08x", math.random(0, 0x7fffffff))
local counter = 0
local function fresh_run_id()
  counter = counter + 1
  return string.format('"runId":"%s-%04x-4%03x-8%03x-%06x%06x"', prefix,
    math.random(0, 0xffff), math.random(0, 0xfff), math.random(0, 0xfff),
    math.floor(counter / 0x1000000) % 0x1000000, counter % 0x1000000)
end
local function fresh_job()
  return string.format('"name":"etl.daily.%02d"', counter % 100)
end
request = function()
  local fresh = body:gsub('"runId":"[%x%-]+"', fresh_run_id)
  fresh = fresh:gsub('"name":"etl%.daily"', fresh_job)
  return wrk.format(nil, nil, nil, fresh)
end
"""


LINEAGE = "/api/v1/lineage"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def wait_http(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early ({process.returncode}) for {url}")
        try:
            requests.get(url, timeout=1)
            return
        except requests.ConnectionError:
            time.sleep(0.1)
    raise TimeoutError(url)


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process (all its threads) has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds so far per thread kind of the process: its threads by name, digits
    dropped (librdkafka's ``rdk:broker1``..``3`` are one kind; the main thread is the
    process's own name)."""
    tick = os.sysconf("SC_CLK_TCK")
    kinds: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        kind = name.rstrip("0123456789") or name
        kinds[kind] = kinds.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return kinds


def wait_idle(pid: int, timeout: float = 60) -> float:
    """The process's CPU seconds once it has gone idle (under 5% of a core for 0.4 s)."""
    deadline = time.monotonic() + timeout
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(0.4)
        now = cpu_seconds(pid)
        if now - last < 0.02:
            return now
        last = now
    log(f"bench: process {pid} still busy after {timeout:g} s")
    return last


def served_events(base: str) -> int:
    """Events the server answered 200 for so far: a reference's ``/served``, the proxy's
    accepted-events counter."""
    answer = requests.get(base + "/served", timeout=10)
    if answer.ok:
        return int(answer.text)
    metrics = requests.get(base + "/metrics", timeout=10).text
    return int(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith("lineage_proxy_events_accepted_total")
        )
    )


def record_profile(pid: int, path: Path) -> subprocess.Popen[bytes]:
    """py-spy on ``pid`` until SIGINT: a flame graph (``.svg``) and collapsed stacks."""
    spy = REPO / ".venv" / "bin" / "py-spy"
    command = [str(spy), "record", "--pid", str(pid), "--rate", "100", "--nonblocking"]
    log(f"bench: py-spy → {path}.txt")
    # py-spy talks on stdout, which is the bench's JSON.
    return subprocess.Popen([*command, "--format", "raw", "-o", f"{path}.txt"], stdout=sys.stderr)


def run_wrk(url: str, body: Path, seconds: int, connections: int) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_SCRIPT.replace("FRESH_REQUEST", FRESH_REQUEST))
    # A batch of 1,000 may take seconds: wrk's 2 s default timeout would count it lost.
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout=30s"]
    try:
        result = subprocess.run(
            [*command, "-s", script.name, url],
            capture_output=True,
            text=True,
            env={**os.environ, "BENCH_BODY": str(body)},
            check=True,
        )
    finally:
        os.unlink(script.name)
    return json.loads(result.stdout.strip().splitlines()[-1])


def measure(
    name: str,
    command: list[str],
    env: dict[str, str],
    port: int,
    path: str,
    body: Path,
    events_per_request: int,
    args: argparse.Namespace,
    connections: int | None = None,
) -> dict[str, Any]:
    log(f"bench: {name} ...")
    connections = connections or args.connections
    process = subprocess.Popen(command, env={**os.environ, **env}, cwd=REPO)
    spy: subprocess.Popen[bytes] | None = None
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/healthz", process)
        run_wrk(base + path, body, 2, connections)  # warm-up: JIT-free, but caches/pools
        # wrk stops with requests in flight that the server still works on: measure from
        # idle to idle, per event the server answered (not per response wrk counted).
        cpu_before = wait_idle(process.pid)
        # What the server burns with no load (pollers, timers, readiness checks): spread
        # over the events of a slow run it is part of their cost.
        idle_before, idle_started = cpu_seconds(process.pid), time.monotonic()
        time.sleep(2)
        idle_cpu = (cpu_seconds(process.pid) - idle_before) / (time.monotonic() - idle_started)
        threads_before = thread_cpu_seconds(process.pid)
        if args.py_spy is not None and name.endswith("/proxy"):
            spy = record_profile(process.pid, args.py_spy / name.replace("/", "-"))
        cpu_before = cpu_seconds(process.pid)
        served_before = served_events(base)
        stats = run_wrk(base + path, body, args.seconds, connections)
        cpu = wait_idle(process.pid) - cpu_before
        served = served_events(base) - served_before
        threads_after = thread_cpu_seconds(process.pid)
        rss = peak_rss_mib(process.pid)
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its profile on SIGINT
            spy.wait(timeout=60)
        process.terminate()
        process.wait(timeout=30)
    requests_per_s = stats["requests"] / (stats["duration_us"] / 1e6)
    return {
        "events_per_s": round(requests_per_s * events_per_request, 1),
        "requests_per_s": round(requests_per_s, 1),
        # The server's CPU per event: on a shared machine far steadier than events/s.
        "cpu_us_per_event": round(cpu / max(served, 1) * 1e6, 1),
        # The same split by thread kind: the event loop (the process's name), the Kafka
        # poll thread, librdkafka's own (rdk:broker, rdk:main), the archive's writers.
        "cpu_us_per_event_by_thread": {
            kind: round((seconds - threads_before.get(kind, 0.0)) / max(served, 1) * 1e6, 1)
            for kind, seconds in sorted(threads_after.items())
            if seconds - threads_before.get(kind, 0.0) > 0
        },
        "idle_cpu_percent": round(idle_cpu * 100, 2),
        "events_served": served,
        "p50_ms": round(stats["p50_us"] / 1000, 3),
        "p99_ms": round(stats["p99_us"] / 1000, 3),
        "peak_rss_mib": rss,
        "connections": connections,
        "non_2xx": stats["non_2xx"],
        "socket_errors": stats["socket_errors"],
    }


def rules_file(path: Path, rules: int) -> Path:
    """Rules sending the bench event (job namespace team-a) to Kafka by their last rule."""
    lines = ["version: 1", "destinations:", "  kafka: {kind: kafka}", "rules:"]
    lines += [
        f"  - {{name: team-{i:03d}, match: {{job_namespace: team-{i:03d}}}, to: [kafka]}}"
        for i in range(rules - 1)
    ]
    lines += [
        "  - {name: bench, match: {kind: run, job_namespace: team-a}, to: [kafka]}",
        "default: {drop: true}",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=10, help="per scenario (default 10)")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument(
        "--scenarios",
        default=",".join(ALL_SCENARIOS),
        help=f"comma-separated subset of {','.join(ALL_SCENARIOS)} (default: all)",
    )
    parser.add_argument("--rss-seconds", type=int, default=60, help="per RSS run (default 60)")
    parser.add_argument(
        "--quick", action="store_true", help="3 s per scenario, 10 s per RSS run: a smoke run"
    )
    parser.add_argument(
        "--kafka",
        default="embedded",
        help="comma-separated: embedded (Tansu), cluster (3 Apache Kafka brokers started "
        "for the run); each runs every scenario (default: embedded)",
    )
    parser.add_argument(
        "--bootstrap", help="host:port of a running Kafka cluster to use instead of --kafka"
    )
    parser.add_argument(
        "--py-spy",
        type=Path,
        metavar="DIR",
        help="record py-spy profiles of the proxy (not the references) in each ingest "
        "scenario's measured run into DIR (collapsed stacks; the sampling costs the "
        "proxy some CPU, so such a run's figures are not for comparison)",
    )
    args = parser.parse_args()
    if args.py_spy is not None:
        args.py_spy.mkdir(parents=True, exist_ok=True)
    if args.quick:
        args.seconds, args.rss_seconds = 3, 10
    wanted = set(args.scenarios.split(","))
    if shutil.which("wrk") is None:
        log("bench: wrk not found; install it (apt-get install wrk) or use scripts/bench.sh")
        return 2

    work = Path(tempfile.mkdtemp(prefix="lineage-bench-"))
    single = work / "single.json"
    single.write_bytes(orjson.dumps(rich_run_event()))
    naive = work / "naive.json"
    naive.write_bytes(orjson.dumps({**rich_run_event(), "eventTime": "2026-11-23T10:00:00.123"}))
    kinds = ["bootstrap"] if args.bootstrap else args.kafka.split(",")
    # The machine's 1/5/15-minute load averages at the start and the end: shared machines
    # are noisy, and figures are only as good as the load they were taken under.
    load_average = {"start": os.getloadavg()}
    with ExitStack() as running:
        bootstraps = {
            kind: running.enter_context(kafka_for(kind, args.bootstrap, work)) for kind in kinds
        }
        by_kafka = run_scenarios(bootstraps, wanted, work, args)
    load_average["end"] = os.getloadavg()
    results: dict[str, Any] = by_kafka[kinds[0]] if len(kinds) == 1 else by_kafka
    report = {
        "benchmark": "http_ingest",
        "event_bytes": single.stat().st_size,
        "batch_size": args.batch_size,
        "seconds_per_scenario": args.seconds,
        "connections": args.connections,
        "cpus": os.cpu_count(),
        "kafka": kinds,
        "load_average": load_average,
        "results": results,
    }
    if {"embedded", "cluster"} <= set(by_kafka):
        report["across_kafka"] = across_kafka(by_kafka["embedded"], by_kafka["cluster"])
    print(json.dumps(report, indent=2))
    return 0


@contextmanager
def kafka_for(kind: str, bootstrap: str | None, work: Path) -> Iterator[str]:
    """The bootstrap address of the Kafka ``kind`` names, for as long as the block runs."""
    if kind == "bootstrap" and bootstrap:
        yield bootstrap
    elif kind == "embedded":
        with EmbeddedBroker() as broker:
            yield broker.bootstrap_servers
    elif kind == "cluster":
        log("bench: starting a 3-broker Apache Kafka cluster ...")
        cluster = KafkaCluster(work / "kafka", brokers=3).start()
        try:
            warm_up(cluster.bootstrap_servers)
            yield cluster.bootstrap_servers
        finally:
            cluster.stop()
    else:
        raise SystemExit(f"bench: --kafka {kind!r}: use embedded or cluster")


def warm_up(bootstrap: str) -> None:
    """One idempotent acks=all write confirmed: a fresh cluster makes its first idempotent
    producer wait while it creates its internal topics ("coordinator load in progress"),
    which would land in the first scenario's figures."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    producer.produce("bench.warm-up", b"{}")
    if producer.flush(120) != 0:
        raise SystemExit(f"bench: the cluster at {bootstrap} confirmed no write in 120 s")


def run_scenarios(
    bootstraps: dict[str, str], wanted: set[str], work: Path, args: argparse.Namespace
) -> dict[str, dict[str, Any]]:
    """Every wanted scenario against each Kafka of ``bootstraps`` (every one running for
    the whole run). Each ingest scenario runs on every Kafka in turn before the next, so
    the two halves of a comparison are minutes apart at most, under the same brokers."""
    results: dict[str, dict[str, Any]] = {kind: {} for kind in bootstraps}
    ports = {kind: free_port() for kind in bootstraps}
    envs = {
        kind: {
            "LINEAGE_PROXY__SERVER__PORT": str(ports[kind]),
            "LINEAGE_PROXY__KAFKA__BOOTSTRAP_SERVERS": bootstrap,
            "LINEAGE_PROXY__KAFKA__TOPIC": "bench.proxy",
            "LINEAGE_PROXY__LOGGING__LEVEL": "WARNING",
            # The proxy alone: consumer daemons run as their own processes in production
            # (bench/consumer_throughput.py measures them); the archive goes to scratch.
            "LINEAGE_PROXY__SERVER__RUN_CONSUMERS": "[]",
            "LINEAGE_PROXY__ROUTING__ARCHIVE_ROOT": str(work / "archive"),
            # The spool in the run's scratch directory, not the repository's var/.
            "LINEAGE_PROXY__KAFKA__SPOOL__DIRECTORY": str(work / f"spool-{kind}"),
        }
        for kind, bootstrap in bootstraps.items()
    }
    proxy = [sys.executable, "-m", "proxy", "serve", "--config", str(REPO / "config.yaml")]
    for label, body, per_request, path, connections in ingest_scenarios(work, args):
        if label not in wanted:
            continue
        for kind, bootstrap in bootstraps.items():
            results[kind][label] = ingest_scenario(
                f"{kind}/{label}",
                body,
                per_request,
                path,
                connections,
                proxy,
                envs[kind],
                bootstrap,
                args,
            )
    single, naive = work / "single.json", work / "naive.json"
    for kind in bootstraps:
        env, port, out = envs[kind], ports[kind], results[kind]
        if "routing" in wanted:
            out["routing"] = routing_scenario(proxy, env, port, single, work, args)
        if "repairs" in wanted:
            out["repairs"] = repairs_scenario(proxy, env, port, single, naive, args)
        if "stages" in wanted:
            out["stages"] = stages_scenario(proxy, env, port, single, work, args)
        if "workers" in wanted:
            out["workers"] = workers_scenario(proxy, env, port, single, args)
        if "rss" in wanted:
            out["rss"] = rss_scenario(proxy, env, port, single, work, args)
    return results


def across_kafka(embedded: dict[str, Any], cluster: dict[str, Any]) -> dict[str, Any]:
    """Per ingest scenario and server: events/s on the cluster over events/s on the
    embedded broker, and the within-run ratios (proxy vs references) on each."""
    compared: dict[str, Any] = {}
    for label in INGEST_SCENARIOS:
        if label not in embedded or label not in cluster:
            continue
        compared[label] = {
            f"{name}_cluster_vs_embedded": round(
                cluster[label][name]["events_per_s"] / embedded[label][name]["events_per_s"], 3
            )
            for name in ("proxy", "durable_forwarder", "naive_forwarder", "parse_200")
        }
        compared[label]["ratios_embedded"] = embedded[label]["ratios"]
        compared[label]["ratios_cluster"] = cluster[label]["ratios"]
    return compared


INGEST_SCENARIOS = ("single", "single_c128", "batch", "batch_1000")
ALL_SCENARIOS = (*INGEST_SCENARIOS, "routing", "repairs", "stages", "workers", "rss")


def ingest_scenarios(
    work: Path, args: argparse.Namespace
) -> list[tuple[str, Path, int, str, int | None]]:
    """(label, body, events per request, path, connections or None for --connections):
    single events at --connections (latency-bound) and at 128 (CPU-bound), batches of
    --batch-size and of 1,000 at 8 connections (issue 17's targets)."""
    single = work / "single.json"
    scenarios: list[tuple[str, Path, int, str, int | None]] = [
        ("single", single, 1, LINEAGE, None),
        ("single_c128", single, 1, LINEAGE, 128),
    ]
    for label, size in (("batch", args.batch_size), ("batch_1000", 1000)):
        body = work / f"{label}.json"
        body.write_bytes(orjson.dumps([rich_run_event() for _ in range(size)]))
        scenarios.append((label, body, size, LINEAGE + "/batch", 8))
    return scenarios


def ingest_scenario(
    label: str,
    body: Path,
    per_request: int,
    path: str,
    connections: int | None,
    proxy: list[str],
    proxy_env: dict[str, str],
    bootstrap: str,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """The proxy beside its three references (``reference_servers.py``) on the same load."""
    port = int(proxy_env["LINEAGE_PROXY__SERVER__PORT"])
    ref = [sys.executable, str(REPO / "bench" / "reference_servers.py")]
    servers = {
        "parse_200": ([*ref, "parse", "--port", str(port)], {}),
        "naive_forwarder": (
            [*ref, "forward", "--port", str(port), "--bootstrap", bootstrap],
            {},
        ),
        "durable_forwarder": (
            [*ref, "durable", "--port", str(port), "--bootstrap", bootstrap],
            {},
        ),
        "proxy": (proxy, proxy_env),
    }
    scenario = {
        name: measure(
            f"{label}/{name}", command, env, port, path, body, per_request, args, connections
        )
        for name, (command, env) in servers.items()
    }
    measured = scenario["proxy"]
    references = ("parse_200", "naive_forwarder", "durable_forwarder")
    scenario["ratios"] = {
        f"proxy_vs_{name}": round(measured["events_per_s"] / scenario[name]["events_per_s"], 3)
        for name in references
    }
    # The same comparison by CPU per event (reference's / proxy's): what the throughput
    # ratio would be were both CPU-bound on an otherwise idle core.
    scenario["cpu_ratios"] = {
        f"proxy_vs_{name}": round(
            scenario[name]["cpu_us_per_event"] / max(measured["cpu_us_per_event"], 0.1), 3
        )
        for name in references
    }
    return scenario


def routing_scenario(
    proxy: list[str],
    proxy_env: dict[str, str],
    port: int,
    single: Path,
    work: Path,
    args: argparse.Namespace,
) -> dict[str, Any]:
    routing = {
        name: measure(
            f"routing/{name}",
            proxy,
            {
                **proxy_env,
                "LINEAGE_PROXY__ROUTING__RULES": str(rules_file(work / f"{name}.yaml", n)),
            },
            port,
            LINEAGE,
            single,
            1,
            args,
        )
        for name, n in (("one_rule", 1), ("hundred_rules", 100))
    }
    routing["ratios"] = {
        "hundred_vs_one_rule": round(
            routing["hundred_rules"]["events_per_s"] / routing["one_rule"]["events_per_s"], 3
        )
    }
    return routing


def repairs_scenario(
    proxy: list[str],
    proxy_env: dict[str, str],
    port: int,
    single: Path,
    naive: Path,
    args: argparse.Namespace,
) -> dict[str, Any]:
    strict = {**proxy_env, "LINEAGE_PROXY__VALIDATION__MODE": "strict"}
    repairs = {
        "valid_repairs_off": measure(
            "repairs/valid_repairs_off", proxy, strict, port, LINEAGE, single, 1, args
        ),
        "valid_repairs_on": measure(
            "repairs/valid_repairs_on", proxy, proxy_env, port, LINEAGE, single, 1, args
        ),
        "repaired": measure("repairs/repaired", proxy, proxy_env, port, LINEAGE, naive, 1, args),
    }
    on, off = repairs["valid_repairs_on"], repairs["valid_repairs_off"]
    repairs["ratios"] = {
        "valid_with_vs_without_repairs": round(on["events_per_s"] / off["events_per_s"], 3),
        "repaired_vs_valid": round(repairs["repaired"]["events_per_s"] / on["events_per_s"], 3),
    }
    return repairs


def stages_scenario(
    proxy: list[str],
    proxy_env: dict[str, str],
    port: int,
    single: Path,
    work: Path,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Where a single event's CPU goes (c=128): bare aiohttp, the proxy cut short after
    its HTTP layer and after validation (bench/proxy_stages.py), each default destination
    alone, and both (the proxy as configured). ``cpu_us_added``
    says what each stage adds to the one before it, in CPU µs per event."""
    ref = [sys.executable, str(REPO / "bench" / "reference_servers.py")]
    stages_py = [sys.executable, str(REPO / "bench" / "proxy_stages.py")]
    serve = proxy[proxy.index("serve") :]
    default_rules = (REPO / "routing_rules" / "default.yaml").read_text()
    only = {}
    for destination in ("kafka", "archive"):
        path = work / f"only_{destination}.yaml"
        path.write_text(default_rules.replace("to: [kafka, archive]", f"to: [{destination}]"))
        only[destination] = {**proxy_env, "LINEAGE_PROXY__ROUTING__RULES": str(path)}
    servers: list[tuple[str, list[str], dict[str, str]]] = [
        ("parse_200", [*ref, "parse", "--port", str(port)], {}),
        ("proxy_http_layer", [*stages_py, "http", *serve], proxy_env),
        ("proxy_checked", [*stages_py, "check", *serve], proxy_env),
        ("proxy_kafka_only", proxy, only["kafka"]),
        ("proxy_archive_only", proxy, only["archive"]),
        ("proxy", proxy, proxy_env),
    ]
    stages: dict[str, Any] = {
        name: measure(f"stages/{name}", command, env, port, LINEAGE, single, 1, args, 128)
        for name, command, env in servers
    }
    # What each stage adds: the HTTP layer to bare aiohttp, validation to the HTTP layer,
    # each destination (and both) to validation.
    before = {"proxy_http_layer": "parse_200", "proxy_checked": "proxy_http_layer"}
    for name, _, _ in servers[1:]:
        base = stages[before.get(name, "proxy_checked")]["cpu_us_per_event"]
        stages[name]["cpu_us_added"] = round(stages[name]["cpu_us_per_event"] - base, 1)
    bare = stages["parse_200"]["events_per_s"]
    stages["ratios_to_parse_200"] = {
        name: round(stages[name]["events_per_s"] / bare, 3) for name, _, _ in servers[1:]
    }
    return stages


WORKERS_CONNECTIONS = 128
RSS_CONNECTIONS = 256


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it (the proxy's workers), from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # The command name (2nd field) may hold spaces: fields after the last ")".
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += children.get(current, [])
    return tree


def tree_memory_mib(pid: int, field: str) -> float:
    """``field`` (VmRSS now, VmHWM peak) summed over the process tree, in MiB."""
    total = 0
    for member in process_tree(pid):
        try:
            lines = Path(f"/proc/{member}/status").read_text().splitlines()
        except OSError:
            continue
        total += next((int(x.split()[1]) for x in lines if x.startswith(field + ":")), 0)
    return round(total / 1024, 1)


def wrk_figures(stats: dict[str, Any]) -> dict[str, Any]:
    """Single events/s, p50/p99 and failures from :func:`run_wrk`'s summary."""
    return {
        "events_per_s": round(stats["requests"] / (stats["duration_us"] / 1e6), 1),
        "p50_ms": round(stats["p50_us"] / 1000, 3),
        "p99_ms": round(stats["p99_us"] / 1000, 3),
        "non_2xx": stats["non_2xx"],
        "socket_errors": stats["socket_errors"],
    }


def serve_under_load(
    name: str,
    command: list[str],
    env: dict[str, str],
    port: int,
    body: Path,
    connections: int,
    seconds: int,
    workers: int = 1,
    rss_every: float | None = None,
) -> dict[str, Any]:
    """Start the server, warm it up, load it with wrk; ``rss_every``: sample the process
    tree's RSS that often during the load. With several ``workers``, waits until every
    one answers (one ready early would take every connection)."""
    log(f"bench: {name} ...")
    process = subprocess.Popen(command, env={**os.environ, **env}, cwd=REPO)
    samples: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(rss_every):
            samples.append(tree_memory_mib(process.pid, "VmRSS"))

    sampler = threading.Thread(target=sample, daemon=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/healthz", process)
        if workers > 1:
            wait_workers(base, workers, process)
        run_wrk(base + LINEAGE, body, 2, connections)
        if rss_every is not None:
            samples.append(tree_memory_mib(process.pid, "VmRSS"))
            sampler.start()
        stats = run_wrk(base + LINEAGE, body, seconds, connections)
        stop.set()
        if sampler.is_alive():
            sampler.join()
        processes = len(process_tree(process.pid))
        peak = tree_memory_mib(process.pid, "VmHWM")
    finally:
        stop.set()
        process.terminate()
        process.wait(timeout=60)
    result = {
        **wrk_figures(stats),
        "peak_rss_mib_sum": peak,
        "processes": processes,
        "exit_code": process.returncode,
    }
    if rss_every is not None:
        result["rss_mib_per_second"] = samples
    return result


def wait_workers(base: str, workers: int, process: subprocess.Popen[bytes]) -> None:
    """Until /metrics shows every worker up (lineage_proxy_worker_up)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"proxy exited early ({process.returncode})")
        text = requests.get(base + "/metrics", timeout=5).text
        up = [x for x in text.splitlines() if x.startswith("lineage_proxy_worker_up{")]
        if sum(x.endswith(" 1.0") for x in up) == workers:
            return
        time.sleep(0.2)
    raise TimeoutError(f"{workers} workers not up at {base}")


def workers_scenario(
    proxy: list[str], proxy_env: dict[str, str], port: int, single: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """One worker against two at c=128, same event, same run."""
    scenario: dict[str, Any] = {
        f"workers_{n}": serve_under_load(
            f"workers/{n}",
            [*proxy, "--workers", str(n)],
            proxy_env,
            port,
            single,
            WORKERS_CONNECTIONS,
            args.seconds,
            workers=n,
        )
        for n in (1, 2)
    }
    scenario["ratios"] = {
        "two_vs_one_worker": round(
            scenario["workers_2"]["events_per_s"] / scenario["workers_1"]["events_per_s"], 3
        )
    }
    scenario["connections"] = WORKERS_CONNECTIONS
    return scenario


def rss_trend(samples: list[float]) -> dict[str, float]:
    """Max, first vs last 10 samples (one a second), and the least-squares slope after
    the first 10 (start-up buffers fill there; a leak shows as a steady slope after)."""
    window = max(1, min(10, len(samples) // 2))
    first = sum(samples[:window]) / window
    last = sum(samples[-window:]) / window
    steady = samples[window:]
    n = len(steady)
    mean_x, mean_y = (n - 1) / 2, sum(steady) / max(n, 1)
    spread = sum((x - mean_x) ** 2 for x in range(n)) or 1.0
    slope = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(steady)) / spread
    return {
        "max_mib": max(samples),
        "first_10s_mib": round(first, 1),
        "last_10s_mib": round(last, 1),
        "last_minus_first_mib": round(last - first, 1),
        "steady_slope_mib_per_min": round(slope * 60, 2),
    }


def rss_scenario(
    proxy: list[str],
    proxy_env: dict[str, str],
    port: int,
    single: Path,
    work: Path,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """RSS of every proxy process under c=256, sampled each second: as shipped (the
    archive consumer in-process, writing to scratch) and the proxy alone."""
    shipped = {
        **proxy_env,
        "LINEAGE_PROXY__SERVER__RUN_CONSUMERS": "[archive]",
        "LINEAGE_PROXY__CONSUMERS__ARCHIVE__TARGET__DIRECTORY": str(work / "consumed"),
    }
    scenario: dict[str, Any] = {"connections": RSS_CONNECTIONS, "seconds": args.rss_seconds}
    for name, env in (("with_archive_consumer", shipped), ("proxy_alone", proxy_env)):
        run = serve_under_load(
            f"rss/{name}",
            proxy,
            env,
            port,
            single,
            RSS_CONNECTIONS,
            args.rss_seconds,
            rss_every=1.0,
        )
        scenario[name] = {**run, **rss_trend(run["rss_mib_per_second"])}
    return scenario


if __name__ == "__main__":
    sys.exit(main())
