"""Read the Prometheus text a proxy or consumer serves at /metrics: one parser (the
official one from prometheus_client), so every test reads a sample the same way."""

from __future__ import annotations

import requests
from aiohttp import ClientSession
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["fetch_metrics", "metrics_of", "sample", "total"]


def _matching(text: str, name: str, labels: dict[str, str]) -> list[float]:
    return [
        float(s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample ``name`` (e.g. ``lineage_proxy_spool_records``) carrying
    ``labels`` in ``text``; None when there is none."""
    values = _matching(text, name, labels)
    return values[0] if values else None


def total(text: str, name: str, **labels: str) -> float | None:
    """The sum of every ``name`` sample carrying ``labels`` (e.g. lag over partitions);
    None when there is none."""
    values = _matching(text, name, labels)
    return sum(values) if values else None


async def metrics_of(url: str) -> str:
    """``url``/metrics, read without blocking the event loop."""
    async with ClientSession() as session, session.get(f"{url}/metrics") as resp:
        assert resp.status == 200, resp.status
        return await resp.text()


def fetch_metrics(url: str) -> str:
    """``url``/metrics, for tests that are not async."""
    resp = requests.get(f"{url}/metrics", timeout=10)
    assert resp.status_code == 200, resp.status_code
    return resp.text
