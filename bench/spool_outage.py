"""Benchmark: the Kafka path direct, while spooling (broker down) and while draining.

Run: ``.venv/bin/python bench/spool_outage.py`` (needs ``wrk``). Prints one JSON document.
Three phases in one run, single events from ``--connections`` wrk clients, each for
``--seconds``; the figures to compare are the ratios to ``direct``, measured in the same
run (absolute figures on a shared machine drift):

- ``direct``: broker up, every 2xx after Kafka's delivery report (acks=all).
- ``spooling``: no broker; every 2xx after the event is fsynced to the local spool.
- ``draining``: the proxy restarted on the spool the previous phase filled, broker up;
  clients keep posting (the bench event has one key, so while the spool holds that key
  new events queue behind it — the ordering rule) while the drainer forwards the spool.
  ``drain_events_per_s`` is the spooled events forwarded per second.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.http_ingest import log, peak_rss_mib, run_wrk, wait_http  # noqa: E402
from proxy.server.embedded_broker import EmbeddedBroker, free_port  # noqa: E402
from tests.support.sample_events import rich_run_event  # noqa: E402


def spool_events(url: str) -> float | None:
    """lineage_proxy_spool_events from /metrics (None before the spool exists)."""
    for line in requests.get(f"{url}/metrics", timeout=5).text.splitlines():
        if line.startswith("lineage_proxy_spool_events{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def phase(
    name: str, env: dict[str, str], port: int, body: Path, args: argparse.Namespace
) -> dict[str, Any]:
    log(f"bench: {name} ...")
    command = [sys.executable, "-m", "proxy", "serve", "--config", str(REPO / "config.yaml")]
    process = subprocess.Popen(command, env={**os.environ, **env}, cwd=REPO)
    base = f"http://127.0.0.1:{port}"
    samples: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample_spool() -> None:
        while not stop.is_set():
            depth = spool_events(base)
            if depth is not None:
                samples.append((time.monotonic(), depth))
            time.sleep(0.2)

    try:
        wait_http(base + "/healthz", process)
        sampler = threading.Thread(target=sample_spool, daemon=True)
        started = time.monotonic()
        sampler.start()
        stats = run_wrk(base + "/api/v1/lineage", body, args.seconds, args.connections)
        stop.set()
        sampler.join()
        spooled_at_end = spool_events(base)
        rss = peak_rss_mib(process.pid)
    finally:
        process.terminate()
        process.wait(timeout=60)
    requests_per_s = stats["requests"] / (stats["duration_us"] / 1e6)
    result = {
        "events_per_s": round(requests_per_s, 1),
        "p50_ms": round(stats["p50_us"] / 1000, 3),
        "p99_ms": round(stats["p99_us"] / 1000, 3),
        "peak_rss_mib": rss,
        "non_2xx": stats["non_2xx"],
        "socket_errors": stats["socket_errors"],
        "spool_events_at_end": spooled_at_end,
    }
    if samples:
        first_depth = samples[0][1]
        empty = next((t for t, depth in samples if depth == 0), None)
        result["spool_events_at_start"] = first_depth
        if empty is not None and first_depth:
            result["seconds_until_spool_empty"] = round(empty - started, 2)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=10, help="per phase (default 10)")
    parser.add_argument("--connections", type=int, default=32)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lineage-bench-spool-"))
    body = work / "single.json"
    body.write_bytes(orjson.dumps(rich_run_event()))
    port = free_port()
    broker_port = free_port()
    env = {
        "LINEAGE_PROXY__SERVER__PORT": str(port),
        "LINEAGE_PROXY__KAFKA__BOOTSTRAP_SERVERS": f"127.0.0.1:{broker_port}",
        "LINEAGE_PROXY__KAFKA__TOPIC": "bench.spool",
        "LINEAGE_PROXY__KAFKA__SPOOL__DIRECTORY": str(work / "spool"),
        "LINEAGE_PROXY__LOGGING__LEVEL": "WARNING",
        "LINEAGE_PROXY__SERVER__RUN_CONSUMERS": "[]",
        "LINEAGE_PROXY__ROUTING__ARCHIVE_ROOT": str(work / "archive"),
    }
    results: dict[str, Any] = {}
    with EmbeddedBroker(broker_port):
        results["direct"] = phase("direct", env, port, body, args)
    results["spooling"] = phase("spooling", env, port, body, args)
    with EmbeddedBroker(broker_port):
        results["draining"] = phase("draining", env, port, body, args)
    draining = results["draining"]
    if "seconds_until_spool_empty" in draining:
        draining["drain_events_per_s"] = round(
            draining["spool_events_at_start"] / draining["seconds_until_spool_empty"], 1
        )
    direct = results["direct"]["events_per_s"]
    results["ratios"] = {
        f"{name}_vs_direct": round(results[name]["events_per_s"] / direct, 3)
        for name in ("spooling", "draining")
    }
    report = {
        "benchmark": "spool_outage",
        "event_bytes": body.stat().st_size,
        "seconds_per_phase": args.seconds,
        "connections": args.connections,
        "cpus": os.cpu_count(),
        "results": results,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
