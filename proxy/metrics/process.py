"""Prometheus metrics of one proxy process, in a registry owned by the app (no globals)."""

from __future__ import annotations

import functools
import platform
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

import aiohttp
import confluent_kafka
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from proxy import __version__
from proxy.kafka.client_logs import cluster_log

__all__ = ["KafkaReachability", "ProxyMetrics"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class ProxyMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.accepted = Counter(
            "lineage_proxy_events_accepted",
            "Events acknowledged to the client after every durable destination took them.",
            ["kind"],
            registry=self.registry,
        )
        self.rejected = Counter(
            "lineage_proxy_events_rejected",
            "Events or requests refused, by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.repaired = Counter(
            "lineage_proxy_events_repaired",
            "Values repaired in events that were then accepted, by repair "
            "(proxy/validation/repairs.py).",
            ["repair"],
            registry=self.registry,
        )
        self.delivery_seconds = Histogram(
            "lineage_proxy_delivery_seconds",
            "Time from hand-over to a destination until it confirmed the event.",
            ["destination"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.spooled = Counter(
            "lineage_proxy_events_spooled",
            "Events a destination acknowledged from its local spool because Kafka did not "
            "confirm them (also in delivery_seconds: delivered = that count minus this).",
            ["destination"],
            registry=self.registry,
        )
        self.delivery_failures = Counter(
            "lineage_proxy_delivery_failures",
            "Deliveries a destination refused or timed out, by destination.",
            ["destination", "retriable"],
            registry=self.registry,
        )
        self.best_effort_dropped = Counter(
            "lineage_proxy_best_effort_dropped",
            "Events not sent to a best-effort destination because its queue was full (in"
            " events, or server.max_queued_bytes reached).",
            ["destination"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "lineage_proxy_in_flight_events",
            "Events handed to destinations and not yet confirmed.",
            registry=self.registry,
        )
        self.bytes_in_flight = Gauge(
            "lineage_proxy_request_bytes_in_flight",
            "Request bytes held now (bodies as read plus inflated), against"
            " server.max_bytes_in_flight; past it requests get 503 (reason busy).",
            registry=self.registry,
        )
        self.queued_bytes = Gauge(
            "lineage_proxy_queued_bytes",
            "Bytes (events' JSON) held now in queues nobody waits on, by queue: tap (its"
            " readers), tap_relay (outboxes to other workers), best_effort (deliveries);"
            " together at most server.max_queued_bytes.",
            ["queue"],
            registry=self.registry,
        )
        self.requests = Counter(
            "lineage_proxy_http_requests",
            "HTTP requests by endpoint and status.",
            ["endpoint", "status"],
            registry=self.registry,
        )

        self.client_errors = Counter(
            "lineage_proxy_client_errors",
            "Requests a client broke at the HTTP level (left mid-body, too slow, bad framing),"
            " by kind; never counted as the proxy's errors.",
            ["kind"],
            registry=self.registry,
        )
        self.open_connections = Gauge(
            "lineage_proxy_open_connections",
            "Client connections open now.",
            registry=self.registry,
        )
        self.connections_refused = Counter(
            "lineage_proxy_connections_refused",
            "Connections answered 503 and closed because server.max_connections were open.",
            registry=self.registry,
        )

        Info(
            "lineage_proxy_build",
            "What is running: the proxy's version and the versions it runs on (always 1).",
            registry=self.registry,
        ).info(
            {
                "version": __version__,
                "python": platform.python_version(),
                "aiohttp": aiohttp.__version__,
                "confluent_kafka": confluent_kafka.version()[0],
                "librdkafka": confluent_kafka.libversion()[0],
            }
        )

    @functools.cache  # noqa: B019  # lives as long as its registry; few (endpoint, status)
    def request_counter(self, endpoint: str, status: int) -> Counter:
        """``requests`` for one endpoint and status, looked up once (``labels()`` costs a
        lock and a hash on every call; this is counted on every request)."""
        return self.requests.labels(endpoint, str(status))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _Producer(Protocol):
    settings: dict[str, object]

    @property
    def delivering(self) -> bool: ...


class KafkaReachability(Collector):
    """``lineage_proxy_kafka_reachable{cluster}``: 1 while the producer of that cluster is
    delivering, 0 while it is known not to (what the producer itself tracks), read on
    scrape — so an alert can say "Kafka unreachable" rather than infer it from spooling;
    and ``lineage_proxy_kafka_connection_failures_total{cluster}``, every failure the log
    (throttled to a line a minute) does not repeat."""

    def __init__(self, producers: Callable[[], Iterable[_Producer]]) -> None:
        self._producers = producers

    def collect(self) -> Iterator[Metric]:
        reachable = GaugeMetricFamily(
            "lineage_proxy_kafka_reachable",
            "1 while the Kafka cluster confirms deliveries, 0 while it is known not to.",
            labels=["cluster"],
        )
        clusters: dict[str, bool] = {}
        for producer in self._producers():
            cluster = str(producer.settings.get("bootstrap.servers", ""))
            # Several producers (settings) per cluster: reachable if any of them delivers.
            clusters[cluster] = clusters.get(cluster, False) or producer.delivering
        failures = CounterMetricFamily(
            "lineage_proxy_kafka_connection_failures",
            "Failed connections to the cluster's brokers and refused authentications, as "
            "librdkafka reported them (logged or not: the log says an outage once).",
            labels=["cluster"],
        )
        for cluster, up in clusters.items():
            reachable.add_metric([cluster], 1.0 if up else 0.0)
            failures.add_metric([cluster], float(cluster_log(cluster).failures))
        yield reachable
        yield failures
