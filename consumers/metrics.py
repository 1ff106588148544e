"""Prometheus metrics of one consumer daemon, in its own registry (served on /metrics)."""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["ConsumerMetrics"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class ConsumerMetrics:
    def __init__(self, consumer: str) -> None:
        self.registry = CollectorRegistry()
        labels = {"consumer": consumer}

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            metric = Counter(name, doc, ["consumer", *extra], registry=self.registry)
            return metric if extra else metric.labels(**labels)

        self.delivered = counter("lineage_consumer_delivered", "Events the target accepted.")
        self.retried = counter("lineage_consumer_retried", "Delivery attempts retried.")
        self.dead_lettered = counter(
            "lineage_consumer_dead_lettered",
            "Messages sent to the dead-letter topic, by why (poison, refused).",
            ("why",),
        )
        self.duplicates_skipped = counter(
            "lineage_consumer_duplicates_skipped",
            "Redelivered events the dedupe cache kept from reaching the target again.",
        )
        self.target_seconds = Histogram(
            "lineage_consumer_target_seconds",
            "Time from handing an event (or batch) to the target until it accepted it.",
            ["consumer"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        ).labels(**labels)
        self._lag = Gauge(
            "lineage_consumer_lag",
            "Messages in the partition after the last delivered one.",
            ["consumer", "topic", "partition"],
            registry=self.registry,
        )
        self.circuit_open = Gauge(
            "lineage_consumer_circuit_open",
            "1 while the circuit breaker holds deliveries back (target down).",
            ["consumer"],
            registry=self.registry,
        ).labels(**labels)
        self.consumer = consumer

    def set_lag(self, topic: str, partition: int, lag: int) -> None:
        self._lag.labels(self.consumer, topic, str(partition)).set(lag)

    def forget_partition(self, topic: str, partition: int) -> None:
        with contextlib.suppress(KeyError):
            self._lag.remove(self.consumer, topic, str(partition))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
