"""Benchmark: what the Spark emitter costs the example pipeline, with and without it.

Run: ``.venv/bin/python bench/spark_emitter_overhead.py`` (``--rounds``). Prints one JSON
document on stdout; progress goes to stderr. The example ETL
(``spark_emitter/examples/etl_pipeline.py``: six actions, joins, aggregates, a window, a
catalog table, one failing step) runs in child processes, each its own JVM, alternately
without (``off``) and with (``on``) ``enable_lineage``, in the order off, on, on, off so
that drift on a shared machine falls on both sides. Events go to the ``parse`` reference
server (bare aiohttp: parse, answer 200), so the receiver is not what is measured.

A third variant, ``jar``, runs the same pipeline with the official OpenLineage Spark
integration instead (the jar from ``scripts/openlineage_spark_jar.sh``, as
``spark.extraListeners`` with its http transport to the same reference server), so the
emitter's cost is reported beside the jar's on the same job, in the same run: the order is
off, on, jar, jar, on, off (``--no-jar`` leaves it out).

Per variant: the pipeline's wall time per round (after one warm-up round in the same
JVM), the driver's Python peak RSS and the JVM's peak RSS; for ``on`` also the events sent
and how long after the last action the send queue was empty (for ``jar``: the listener
bus, from whose thread the jar sends). The figures that matter are ``overhead_ratio`` =
median ``on`` / median ``off``, ``jar_overhead_ratio`` = median ``jar`` / median ``off``
and ``emitter_vs_jar`` = median ``on`` / median ``jar``, all measured in the same run
(absolute times on a shared machine drift).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.http_ingest import log, peak_rss_mib, wait_http  # noqa: E402
from proxy.server.embedded_broker import free_port  # noqa: E402


def official_jar() -> str:
    """The official integration's jar, fetched into the cache on first use."""
    script = REPO / "scripts" / "openlineage_spark_jar.sh"
    return subprocess.run([str(script)], capture_output=True, text=True, check=True).stdout.strip()


def jar_conf(url: str) -> dict[str, str]:
    """The official integration as its users configure it, sending to ``url``."""
    return {
        "spark.jars": official_jar(),
        "spark.extraListeners": "io.openlineage.spark.agent.OpenLineageSparkListener",
        "spark.openlineage.transport.type": "http",
        "spark.openlineage.transport.url": url,
        "spark.openlineage.namespace": "bench",
    }


def child(variant: str, rounds: int, url: str) -> dict[str, Any]:
    """One JVM: a warm-up round, then ``rounds`` timed runs of the pipeline."""
    from pyspark.sql import SparkSession

    from spark_emitter import enable_lineage
    from spark_emitter.examples.etl_pipeline import run_pipeline

    work = Path(tempfile.mkdtemp(prefix=f"emitter-bench-{variant}-"))
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("Sales ETL")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
    )
    for key, value in (jar_conf(url) if variant == "jar" else {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("FATAL")
    emitter = enable_lineage(spark, url=url, namespace="bench") if variant == "on" else None
    bus = spark.sparkContext._jsc.sc().listenerBus()
    run_pipeline(spark, work / "warmup")
    seconds, drain = [], []
    for n in range(rounds):
        started = time.perf_counter()
        run_pipeline(spark, work / f"round{n}")
        seconds.append(time.perf_counter() - started)
        if emitter is not None:
            flushed = time.perf_counter()
            emitter.flush(timeout=60)
            drain.append(time.perf_counter() - flushed)
        elif variant == "jar":
            flushed = time.perf_counter()
            bus.waitUntilEmpty(60_000)
            drain.append(time.perf_counter() - flushed)
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    result: dict[str, Any] = {
        "variant": variant,
        "seconds": seconds,
        "python_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "jvm_peak_rss_mib": peak_rss_mib(jvm_pid),
    }
    if emitter is not None:
        emitter.close()
        result.update(
            events_sent=emitter.stats.sent,
            events_failed=emitter.stats.failed + emitter.stats.dropped,
            queue_empty_after_action_seconds=drain,
            listener_errors=emitter.callback_failures,
        )
    if variant == "jar":
        result.update(queue_empty_after_action_seconds=drain)
    spark.stop()
    return result


def run_child(variant: str, rounds: int, url: str) -> dict[str, Any]:
    log(f"spark emitter bench: {variant} ({rounds} rounds + warm-up)")
    completed = subprocess.run(
        [sys.executable, __file__, "--child", variant, "--rounds", str(rounds), "--url", url],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"{variant} run failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per child (3)")
    parser.add_argument("--no-jar", action="store_true", help="leave the official jar out")
    parser.add_argument(
        "--order",
        help="the children to run, e.g. off,on,jar (default off,on,jar,jar,on,off; "
        "off,on,on,off with --no-jar)",
    )
    parser.add_argument("--child", choices=["on", "off", "jar"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.rounds, args.url)))
        return 0

    port = free_port()
    receiver = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "reference_servers.py"), "parse", "--port", str(port)]
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url, receiver)
        order = (
            ("off", "on", "on", "off") if args.no_jar else ("off", "on", "jar", "jar", "on", "off")
        )
        if args.order:
            order = tuple(args.order.split(","))
        runs = [run_child(v, args.rounds, url) for v in order]
    finally:
        receiver.terminate()
        receiver.wait(10)

    def merged(variant: str) -> dict[str, Any]:
        mine = [r for r in runs if r["variant"] == variant]
        seconds = [s for r in mine for s in r["seconds"]]
        summary: dict[str, Any] = {
            "rounds": len(seconds),
            "median_seconds": round(statistics.median(seconds), 3),
            "min_seconds": round(min(seconds), 3),
            "python_peak_rss_mib": max(r["python_peak_rss_mib"] for r in mine),
            "jvm_peak_rss_mib": max(r["jvm_peak_rss_mib"] for r in mine),
        }
        if variant == "on":
            drains = [d for r in mine for d in r["queue_empty_after_action_seconds"]]
            summary.update(
                events_per_round=mine[0]["events_sent"] // (args.rounds + 1),
                events_failed=sum(r["events_failed"] for r in mine),
                listener_errors=sum(r["listener_errors"] for r in mine),
                queue_empty_after_last_action_p50_seconds=round(statistics.median(drains), 3),
            )
        if variant == "jar":
            drains = [d for r in mine for d in r["queue_empty_after_action_seconds"]]
            summary.update(
                listener_bus_empty_after_last_action_p50_seconds=round(statistics.median(drains), 3)
            )
        return summary

    off, on = merged("off"), merged("on")
    jar_figures: dict[str, Any] = {}
    if "jar" in order:
        jar = merged("jar")
        jar_figures = {
            "jar": {"version": Path(official_jar()).stem.rsplit("-", 1)[-1], **jar},
            "jar_overhead_ratio": round(jar["median_seconds"] / off["median_seconds"], 3),
            "emitter_vs_jar": round(on["median_seconds"] / jar["median_seconds"], 3),
        }
    print(
        json.dumps(
            {
                "benchmark": "spark_emitter_overhead",
                "pipeline": "spark_emitter/examples/etl_pipeline.py (6 actions, local[2])",
                "off": off,
                "on": on,
                "overhead_ratio": round(on["median_seconds"] / off["median_seconds"], 3),
                "overhead_ratio_min": round(on["min_seconds"] / off["min_seconds"], 3),
                **jar_figures,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
