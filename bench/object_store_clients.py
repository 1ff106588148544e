"""Benchmark: boto3, aiobotocore and s3fs uploading the object archive's workload to S3Proxy.

The ``object_archive`` writer (proxy/destinations/object_archive/destination.py) uses boto3
with every call on a worker thread. This measures that choice against the two async
alternatives in the same run, on the same real S3-compatible server the tests use (S3Proxy
over a scratch folder, started by tests/support/s3_server.py; ``scripts/s3.sh`` fetches its
jars).

aiobotocore and s3fs pin botocore, so they stay out of the project and its .venv: the
benchmark runs from a venv of its own, outside git, made once with::

    python3 -m venv ~/.cache/lineage-proxy/bench-s3-venv
    ~/.cache/lineage-proxy/bench-s3-venv/bin/pip install boto3 aiobotocore s3fs

Run from the repository root (about 2 minutes on 2 cores)::

    ~/.cache/lineage-proxy/bench-s3-venv/bin/python bench/object_store_clients.py --rounds 3

Prints one JSON document on stdout (progress on stderr). The workload, the same for every
library, mirrors what the writer sends:

- ``small``: ``--small`` objects of about ``--small-kib`` KiB of JSON Lines, each one PUT
  (an object finished before it reached a part);
- ``multipart``: ``--multipart`` objects of ``--parts`` parts of ``--part-mib`` MiB (5 MiB
  is S3's minimum), each a multipart upload whose parts go one after another, as the
  writer's do (create, one upload_part per part, complete).

Both keep ``--concurrency`` uploads in flight: boto3 on that many threads under asyncio
(``asyncio.to_thread``, as the writer), aiobotocore and s3fs as that many asyncio tasks
(s3fs: ``_pipe_file`` for a PUT, its ``_call_s3`` for the multipart calls — s3fs has no
async writable file). The three share the writer's client settings: path-style URLs,
checksums only where required (S3Proxy refuses botocore's default trailing checksums), 2
attempts. All three sign with botocore, which over plain HTTP (as here) hashes each body.

Each library runs in a process of its own (``--rounds`` times, the order rotated every
round), so its CPU time (``time.process_time``: every thread) and peak RSS are its own. A
client is made and warmed with one request before the clock starts: the writer keeps one
client for its life. After each run the benchmark HEADs every object and fails if one is
missing or of the wrong size, then deletes them.

Ratios are to the first of ``--libraries`` (boto3), taken within each round and then the
median: ``*_vs_<reference>`` is the library's objects/s over the reference's (higher is
faster); ``cpu_ratio_vs_<reference>`` is the reference's CPU seconds over the library's
(higher means less CPU, like bench/README.md's CPU ratios).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import importlib.metadata
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.s3_server import ACCESS_KEY, SECRET_KEY, S3Server  # noqa: E402

LIBRARIES = ("boto3", "aiobotocore", "s3fs")
BUCKET = "bench-clients"
REGION = "us-east-1"
MIB = 1024 * 1024
VENV_HINT = (
    "make the benchmark's venv (outside git): python3 -m venv "
    "~/.cache/lineage-proxy/bench-s3-venv && ~/.cache/lineage-proxy/bench-s3-venv/bin/pip "
    "install boto3 aiobotocore s3fs; then run this script with its python"
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- the workload -----------------------------------------------------------------------


def jsonl(size: int, seed: int) -> bytes:
    """Whole JSON Lines (OpenLineage-like RunEvents, ~1 KB each) of at least ``size``
    bytes; the same bytes for the same arguments."""
    lines = []
    total = 0
    n = 0
    while total < size:
        event = {
            "eventType": "COMPLETE",
            "eventTime": f"2026-11-26T10:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
            "producer": "https://github.com/OpenLineage/OpenLineage/tree/1.53.0/integration/spark",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": f"{seed:08x}-0000-7000-8000-{n:012x}", "facets": {}},
            "job": {"namespace": "team-a", "name": f"daily_orders.step_{n % 17}", "facets": {}},
            "inputs": [
                {"namespace": "s3://warehouse", "name": f"raw/orders/part-{n % 31:05d}"},
                {"namespace": "s3://warehouse", "name": "raw/customers"},
            ],
            "outputs": [
                {
                    "namespace": "s3://warehouse",
                    "name": "curated/orders_daily",
                    "facets": {
                        "schema": {
                            "fields": [
                                {"name": name, "type": kind}
                                for name, kind in (
                                    ("order_id", "bigint"),
                                    ("customer_id", "bigint"),
                                    ("amount", "decimal(12,2)"),
                                    ("currency", "string"),
                                    ("ordered_at", "timestamp"),
                                )
                            ]
                        }
                    },
                }
            ],
        }
        line = json.dumps(event, separators=(",", ":")).encode() + b"\n"
        lines.append(line)
        total += len(line)
        n += 1
    return b"".join(lines)


class Workload:
    """What every library uploads, and the keys and sizes it must leave in the bucket."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.small_count = args.small
        self.multipart_count = args.multipart
        self.parts = args.parts
        self.concurrency = args.concurrency
        self.small_body = jsonl(args.small_kib * 1024, seed=1)
        self.part_body = jsonl(args.part_mib * MIB, seed=2)

    def small_keys(self, prefix: str) -> list[str]:
        return [f"{prefix}/small/events-{i:05d}.jsonl" for i in range(self.small_count)]

    def multipart_keys(self, prefix: str) -> list[str]:
        return [f"{prefix}/multipart/events-{i:05d}.jsonl" for i in range(self.multipart_count)]

    def expected(self, prefix: str) -> dict[str, int]:
        sizes = dict.fromkeys(self.small_keys(prefix), len(self.small_body))
        sizes.update(dict.fromkeys(self.multipart_keys(prefix), len(self.part_body) * self.parts))
        return sizes


def connection(endpoint: str) -> dict[str, Any]:
    """Where and as whom every library connects: S3Proxy's address and the test keys."""
    return {
        "endpoint_url": endpoint,
        "region_name": REGION,
        "aws_access_key_id": ACCESS_KEY,
        "aws_secret_access_key": SECRET_KEY,
    }


def client_settings() -> dict[str, Any]:
    """botocore Config arguments: the object archive writer's."""
    return {
        "connect_timeout": 10.0,
        "read_timeout": 10.0,
        "retries": {"max_attempts": 2, "mode": "standard"},
        "s3": {"addressing_style": "path"},
        "request_checksum_calculation": "when_required",
        "response_checksum_validation": "when_required",
        "max_pool_connections": 32,
    }


# -- one library in its own process (--worker) -------------------------------------------

# One upload: PUT (small) or multipart (parts one after another).
Upload = Callable[[str], Awaitable[None]]


async def run_phase(label: str, keys: list[str], upload: Upload, workload: Workload) -> dict:
    """Upload every key with ``workload.concurrency`` in flight; wall clock and CPU."""
    gate = asyncio.Semaphore(workload.concurrency)

    async def one(key: str) -> None:
        async with gate:
            await upload(key)

    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(key) for key in keys))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    body = workload.small_body if label == "small" else workload.part_body
    parts = 1 if label == "small" else workload.parts
    mib = len(keys) * len(body) * parts / MIB
    return {
        "objects": len(keys),
        "mib": round(mib, 2),
        "seconds": round(wall, 3),
        "objects_per_s": round(len(keys) / wall, 2),
        "mib_per_s": round(mib / wall, 2),
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_mib": round(cpu * 1000 / mib, 2),
    }


async def run_uploads(
    put: Callable[[str, bytes], Awaitable[Any]],
    call: Callable[..., Awaitable[Any]],
    workload: Workload,
    prefix: str,
) -> dict[str, Any]:
    """Both phases with one library's ``put(key, body)`` and ``call(operation, **kw)``."""

    async def small(key: str) -> None:
        await put(key, workload.small_body)

    async def multipart(key: str) -> None:
        started = await call("create_multipart_upload", Bucket=BUCKET, Key=key)
        upload_id = started["UploadId"]
        done = []
        try:
            for number in range(1, workload.parts + 1):
                part = await call(
                    "upload_part",
                    Bucket=BUCKET,
                    Key=key,
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=workload.part_body,
                )
                done.append({"PartNumber": number, "ETag": part["ETag"]})
            await call(
                "complete_multipart_upload",
                Bucket=BUCKET,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": done},
            )
        except BaseException:
            await call("abort_multipart_upload", Bucket=BUCKET, Key=key, UploadId=upload_id)
            raise

    # Warm the client (models, connection) as a long-lived writer's is.
    await put(f"{prefix}/warmup.jsonl", workload.small_body)
    rss_ready = rss_mib()
    return {
        "rss_ready_mib": rss_ready,
        "small": await run_phase("small", workload.small_keys(prefix), small, workload),
        "multipart": await run_phase(
            "multipart", workload.multipart_keys(prefix), multipart, workload
        ),
    }


async def with_boto3(endpoint: str, workload: Workload, prefix: str) -> dict[str, Any]:
    """boto3's synchronous client, each call on one of ``concurrency`` threads."""
    import boto3
    from botocore.config import Config

    asyncio.get_running_loop().set_default_executor(
        concurrent.futures.ThreadPoolExecutor(max_workers=workload.concurrency)
    )
    client = boto3.client(
        "s3",
        **connection(endpoint),
        config=Config(**client_settings()),
    )

    async def put(key: str, body: bytes) -> Any:
        return await asyncio.to_thread(client.put_object, Bucket=BUCKET, Key=key, Body=body)

    async def call(operation: str, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(client, operation), **kwargs)

    try:
        return await run_uploads(put, call, workload, prefix)
    finally:
        client.close()


async def with_aiobotocore(endpoint: str, workload: Workload, prefix: str) -> dict[str, Any]:
    """aiobotocore's client (aiohttp) on the event loop."""
    from aiobotocore.config import AioConfig  # type: ignore[import-not-found]
    from aiobotocore.session import get_session  # type: ignore[import-not-found]

    async with get_session().create_client(
        "s3",
        **connection(endpoint),
        config=AioConfig(**client_settings()),
    ) as client:

        async def put(key: str, body: bytes) -> Any:
            return await client.put_object(Bucket=BUCKET, Key=key, Body=body)

        async def call(operation: str, **kwargs: Any) -> Any:
            return await getattr(client, operation)(**kwargs)

        return await run_uploads(put, call, workload, prefix)


async def with_s3fs(endpoint: str, workload: Workload, prefix: str) -> dict[str, Any]:
    """s3fs's async file system (on aiobotocore): ``_pipe_file`` and ``_call_s3``."""
    import s3fs  # type: ignore[import-not-found]

    fs = s3fs.S3FileSystem(
        asynchronous=True,
        skip_instance_cache=True,
        key=ACCESS_KEY,
        secret=SECRET_KEY,
        endpoint_url=endpoint,
        client_kwargs={"region_name": REGION},
        config_kwargs=client_settings(),
    )
    session = await fs.set_session()

    async def put(key: str, body: bytes) -> Any:
        return await fs._pipe_file(f"{BUCKET}/{key}", body)

    async def call(operation: str, **kwargs: Any) -> Any:
        return await fs._call_s3(operation, **kwargs)

    try:
        return await run_uploads(put, call, workload, prefix)
    finally:
        await session.close()


RUNNERS = {"boto3": with_boto3, "aiobotocore": with_aiobotocore, "s3fs": with_s3fs}


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def worker(args: argparse.Namespace) -> int:
    """One library, one run: the figures as JSON on stdout."""
    workload = Workload(args)
    result = asyncio.run(RUNNERS[args.worker](args.endpoint, workload, args.prefix))
    # ru_maxrss is KiB on Linux.
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(result))
    return 0


# -- the run: server, rounds, verification ----------------------------------------------


def verify_and_clear(client: Any, workload: Workload, prefix: str) -> int:
    """HEAD every object the run had to write (size included), check that nothing else
    and no unfinished upload is under its prefix, then delete them. Raises on a mismatch."""
    expected = workload.expected(prefix)
    for key, size in expected.items():
        got = client.head_object(Bucket=BUCKET, Key=key)["ContentLength"]
        if got != size:
            raise RuntimeError(f"{key}: {got} bytes stored, {size} uploaded")
    listed = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        listed += [item["Key"] for item in page.get("Contents", [])]
    unexpected = set(listed) - set(expected) - {f"{prefix}/warmup.jsonl"}
    if unexpected:
        raise RuntimeError(f"unexpected objects under {prefix}: {sorted(unexpected)[:5]}")
    unfinished = client.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix).get("Uploads", [])
    if unfinished:
        raise RuntimeError(f"{len(unfinished)} unfinished multipart uploads under {prefix}")
    # One by one: DeleteObjects needs a checksum header S3Proxy does not implement.
    for key in listed:
        client.delete_object(Bucket=BUCKET, Key=key)
    return len(expected)


def warm_server(endpoint: str, client: Any, workload: Workload) -> None:
    """The same calls once through a JVM fresh from its start (boto3's run, in this
    process, then cleared), so that the first library of the first round does not pay
    for the server's warm-up."""
    asyncio.run(with_boto3(endpoint, workload, "warmup"))
    verify_and_clear(client, workload, "warmup")


def run_worker(library: str, endpoint: str, prefix: str, args: argparse.Namespace) -> dict:
    command = [
        sys.executable,
        __file__,
        "--worker",
        library,
        "--endpoint",
        endpoint,
        "--prefix",
        prefix,
        "--small",
        str(args.small),
        "--small-kib",
        str(args.small_kib),
        "--multipart",
        str(args.multipart),
        "--parts",
        str(args.parts),
        "--part-mib",
        str(args.part_mib),
        "--concurrency",
        str(args.concurrency),
    ]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{library} run failed (exit {done.returncode})")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in ("boto3", "botocore", "aiobotocore", "aiohttp", "s3fs", "fsspec"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    project = sorted((REPO / ".venv").glob("lib/python*/site-packages/boto3-*.dist-info"))
    if project:
        found["project_venv_boto3"] = project[-1].name.removeprefix("boto3-").split(".dist")[0]
    return found


def summarize(rounds: list[dict[str, Any]], libraries: list[str]) -> dict[str, Any]:
    """Medians over the rounds per library and phase; ratios to the reference taken
    within each round, then their median."""
    reference = libraries[0]
    rounds = [r["runs"] for r in rounds]
    summary: dict[str, Any] = {}
    for library in libraries:
        runs = [r[library] for r in rounds]
        entry: dict[str, Any] = {
            "peak_rss_mib": statistics.median(run["peak_rss_mib"] for run in runs),
            "rss_ready_mib": statistics.median(run["rss_ready_mib"] for run in runs),
        }
        for phase in ("small", "multipart"):
            figures = [run[phase] for run in runs]
            rates = [f["objects_per_s"] for f in figures]
            entry[phase] = {
                "objects_per_s": statistics.median(rates),
                "objects_per_s_range": [min(rates), max(rates)],
                "mib_per_s": statistics.median(f["mib_per_s"] for f in figures),
                "cpu_s": statistics.median(f["cpu_s"] for f in figures),
                "cpu_ms_per_mib": statistics.median(f["cpu_ms_per_mib"] for f in figures),
                f"objects_per_s_vs_{reference}": round(
                    statistics.median(
                        r[library][phase]["objects_per_s"] / r[reference][phase]["objects_per_s"]
                        for r in rounds
                    ),
                    3,
                ),
                f"cpu_ratio_vs_{reference}": round(
                    statistics.median(
                        r[reference][phase]["cpu_s"] / r[library][phase]["cpu_s"] for r in rounds
                    ),
                    3,
                ),
            }
        summary[library] = entry
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=(
            "First: python3 -m venv ~/.cache/lineage-proxy/bench-s3-venv && "
            "~/.cache/lineage-proxy/bench-s3-venv/bin/pip install boto3 aiobotocore s3fs "
            "(outside git: aiobotocore and s3fs pin botocore). Example, from the repository "
            "root: ~/.cache/lineage-proxy/bench-s3-venv/bin/python "
            "bench/object_store_clients.py --rounds 3"
        ),
    )
    parser.add_argument("--rounds", type=int, default=3, help="runs of every library (3)")
    parser.add_argument(
        "--libraries",
        default=",".join(LIBRARIES),
        help="comma-separated, the first is the reference of the ratios (boto3,aiobotocore,s3fs)",
    )
    parser.add_argument("--small", type=int, default=256, help="single-PUT objects (256)")
    parser.add_argument("--small-kib", type=int, default=64, help="their size in KiB (64)")
    parser.add_argument("--multipart", type=int, default=16, help="multipart objects (16)")
    parser.add_argument("--parts", type=int, default=3, help="parts per multipart object (3)")
    parser.add_argument("--part-mib", type=int, default=5, help="part size in MiB (5: minimum)")
    parser.add_argument("--concurrency", type=int, default=8, help="uploads in flight (8)")
    parser.add_argument("--worker", choices=LIBRARIES, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    libraries = args.libraries.split(",")
    missing = []
    for library in libraries:
        if library not in LIBRARIES:
            parser.error(f"unknown library {library!r}: one of {', '.join(LIBRARIES)}")
        try:
            importlib.metadata.version(library)
        except importlib.metadata.PackageNotFoundError:
            missing.append(library)
    if missing:
        log(f"bench: {', '.join(missing)} not installed here ({sys.executable}): {VENV_HINT}")
        return 2
    import boto3
    from botocore.config import Config

    workload = Workload(args)
    load_start = os.getloadavg()
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="lineage-bench-s3-clients-") as scratch:
        log("bench: starting S3Proxy ...")
        server = S3Server(Path(scratch)).start()
        try:
            client = boto3.client(
                "s3",
                **connection(server.endpoint),
                config=Config(**client_settings()),
            )
            client.create_bucket(Bucket=BUCKET)
            log("bench: warming S3Proxy up ...")
            warm_server(server.endpoint, client, workload)
            for number in range(args.rounds):
                shift = number % len(libraries)
                order = libraries[shift:] + libraries[:shift]
                runs: dict[str, dict] = {}
                for library in order:
                    prefix = f"round{number}/{library}"
                    log(f"bench: round {number + 1}/{args.rounds}: {library} ...")
                    runs[library] = run_worker(library, server.endpoint, prefix, args)
                    runs[library]["verified_objects"] = verify_and_clear(client, workload, prefix)
                    small, multi = runs[library]["small"], runs[library]["multipart"]
                    log(
                        f"bench:   small {small['objects_per_s']} objects/s "
                        f"(CPU {small['cpu_s']} s), multipart {multi['mib_per_s']} MiB/s "
                        f"(CPU {multi['cpu_s']} s), peak RSS {runs[library]['peak_rss_mib']} MiB"
                    )
                rounds.append({"order": order, "runs": runs})
        finally:
            server.stop()
    report = {
        "benchmark": "object_store_clients",
        "server": "S3Proxy (filesystem-nio2) on 127.0.0.1, over HTTP",
        "workload": {
            "small_objects": args.small,
            "small_object_bytes": len(workload.small_body),
            "multipart_objects": args.multipart,
            "parts": args.parts,
            "part_bytes": len(workload.part_body),
            "concurrency": args.concurrency,
        },
        "rounds": args.rounds,
        "reference": libraries[0],
        "versions": versions(),
        "cpus": os.cpu_count(),
        "load_average_start": [round(x, 2) for x in load_start],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "summary": summarize(rounds, libraries),
        "runs": rounds,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
