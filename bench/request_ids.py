"""Benchmark: what request ids add to each request.

Run: ``.venv/bin/python bench/request_ids.py``. Prints JSON, microseconds per request:
``generated`` (no ``X-Request-Id`` sent: an id is made), ``from_client`` (a sane one is
checked and kept) — each the whole per-request work: the id made current, and the response
header — and, for scale, ``middleware`` (the app's whole error/metrics middleware,
request ids included, around a handler that only builds an empty response).
Rounds alternate so that machine noise hits every figure alike; medians are reported.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aiohttp import web  # noqa: E402
from aiohttp.test_utils import make_mocked_request  # noqa: E402

from proxy.config.settings import ServerConfig  # noqa: E402
from proxy.metrics.process import ProxyMetrics  # noqa: E402
from proxy.web import request_ids  # noqa: E402
from proxy.web.app import _errors_and_metrics  # noqa: E402
from proxy.web.client_faults import ClientFaults  # noqa: E402
from proxy.web.connections import ConnectionGuard  # noqa: E402
from proxy.web.keys import CLIENT_FAULTS, CONNECTIONS, METRICS  # noqa: E402

ROUNDS = 7
CALLS = 20_000


def _ids_once(request: web.Request, response: web.Response) -> None:
    response.headers[request_ids.HEADER] = request_ids.bind(request)


def _per_call_us(run: Callable[[], None]) -> float:
    started = time.perf_counter()
    for _ in range(CALLS):
        run()
    return (time.perf_counter() - started) / CALLS * 1e6


async def _middleware_us(request: web.Request) -> float:
    async def handler(request: web.Request) -> web.Response:
        return web.Response()

    started = time.perf_counter()
    for _ in range(CALLS):
        await _errors_and_metrics(request, handler)
    return (time.perf_counter() - started) / CALLS * 1e6


def main() -> None:
    metrics = ProxyMetrics()
    app = web.Application()
    app[METRICS] = metrics
    app[CLIENT_FAULTS] = ClientFaults(metrics)
    app[CONNECTIONS] = ConnectionGuard(ServerConfig(), app[CLIENT_FAULTS], metrics)
    plain = make_mocked_request("GET", "/healthz", app=app)
    with_id = make_mocked_request(
        "GET", "/healthz", headers={"X-Request-Id": "3f2a9c1e-7b4d-4e21-9a0b-5c6d7e8f9a0b"}
    )
    response = web.Response()
    figures: dict[str, list[float]] = {"generated": [], "from_client": [], "middleware": []}
    for _ in range(ROUNDS):
        figures["generated"].append(_per_call_us(lambda: _ids_once(plain, response)))
        figures["from_client"].append(_per_call_us(lambda: _ids_once(with_id, response)))
        figures["middleware"].append(asyncio.run(_middleware_us(plain)))
    print(json.dumps({name: round(median(v), 3) for name, v in figures.items()}, indent=2))


if __name__ == "__main__":
    main()
