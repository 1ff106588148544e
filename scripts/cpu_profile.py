#!/usr/bin/env python3
"""Run a command and say where the machine's CPU went while it ran.

The suite's budget (docs/contributing/test-suite.md) is wall time on a 2-core machine; when the
cores are busy all along, only less CPU work makes it faster, and this shows which processes do
that work: every process is sampled once a second from /proc (its own user + system time,
its command line), then summed by kind (the Kafka, Marquez, Spark and S3Proxy JVMs,
PostgreSQL, Chromium, the proxy processes the tests start, pytest's workers). A process
that lives less than a second may be missed; the machine-wide busy time (from /proc/stat)
counts everything, so the two totals say how much the sampling missed.

Linux only. Exit code: the command's own; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
# (substring of the command line, kind), first match wins.
KINDS = [
    ("kafka.Kafka", "java: Kafka brokers"),
    ("marquez.MarquezApp", "java: Marquez"),
    ("s3proxy", "java: S3Proxy"),
    ("org.apache.spark", "java: Spark (spark-submit, PySpark JVMs)"),
    ("postgres", "PostgreSQL"),
    ("chrom", "Chromium"),
    ("tansu", "Tansu"),
    ("dbt", "dbt"),
    ("-m proxy", "python: lineage-proxy processes"),
    ("spark_emitter", "python: Spark drivers (spark_emitter)"),
    ("pytest", "python: pytest and its workers"),
    ("execnet", "python: pytest and its workers"),
    ("java", "java: other"),
    ("python", "python: other"),
]


def kind_of(command: str) -> str:
    if command.startswith("["):
        return "kernel threads"
    for needle, kind in KINDS:
        if needle in command:
            return kind
    return command.split(" ", 1)[0].rsplit("/", 1)[-1] or "?"


def machine_ticks() -> tuple[int, int]:
    """(all ticks, idle + iowait ticks) of the whole machine so far."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields), fields[3] + fields[4]


class Sampler:
    """Each process's own CPU seconds at its latest sample, keyed by (pid, start time) so
    a reused pid is another process; the command line of its first sample is kept (a
    zombie's reads empty)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], tuple[float, str]] = {}
        self.stop = threading.Event()

    def sample(self) -> None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue  # gone between listing and reading
            rest = stat[stat.rindex(")") + 2 :].split()
            seconds = (int(rest[11]) + int(rest[12])) / TICK
            command = raw.replace(b"\0", b" ").decode(errors="replace").strip()
            key = (pid, rest[19])
            if key in self.seen and self.seen[key][1]:
                command = self.seen[key][1]
            self.seen[key] = (
                seconds,
                command or f"[{stat[stat.index('(') + 1 : stat.rindex(')')]}]",
            )

    def run(self) -> None:
        while not self.stop.wait(1.0):
            self.sample()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n", 1)[0],
        epilog="example: scripts/cpu_profile.py --json cpu.json -- scripts/test.sh -q",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--top", type=int, default=15, help="processes to list (default 15)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    sampler = Sampler()
    sampler.sample()
    # Processes already running count only what they spend from now on.
    before = {key: seconds for key, (seconds, _) in sampler.seen.items()}
    thread = threading.Thread(target=sampler.run, daemon=True)
    ticks_before, idle_before = machine_ticks()
    started = time.monotonic()
    thread.start()
    code = subprocess.call(command)
    sampler.stop.set()
    thread.join()
    sampler.sample()
    wall = time.monotonic() - started
    ticks, idle = machine_ticks()
    busy = (ticks - ticks_before - (idle - idle_before)) / TICK
    spent = [
        (seconds - before.get(key, 0.0), line) for key, (seconds, line) in sampler.seen.items()
    ]
    by_kind: dict[str, float] = {}
    for seconds, line in spent:
        kind = kind_of(line)
        by_kind[kind] = by_kind.get(kind, 0.0) + seconds
    cores = os.cpu_count() or 1
    figures = {
        "wall_seconds": round(wall, 1),
        "cores": cores,
        "busy_cpu_seconds": round(busy, 1),
        "busy_fraction": round(busy / (wall * cores), 3),
        "sampled_cpu_seconds": round(sum(by_kind.values()), 1),
        "by_kind": {
            k: round(v, 1) for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]) if v >= 0.1
        },
        "top": [
            [round(s, 1), line[:160]]
            for s, line in sorted(spent, key=lambda sl: -sl[0])[: args.top]
        ],
    }
    text = json.dumps(figures, indent=1)
    print(text, file=sys.stderr)
    if args.json:
        args.json.write_text(text + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
