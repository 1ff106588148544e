"""Prometheus metrics of one consumer daemon, in its own registry (served on /metrics).

Daemons that run inside ``serve`` (``server.run_consumers``) also show on the proxy's
``/metrics``: :class:`DaemonsCollector` merges their registries, family by family (every
sample carries its ``consumer`` label), into the proxy's registry.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

__all__ = ["ConsumerMetrics", "DaemonsCollector"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class ConsumerMetrics:
    def __init__(self, consumer: str) -> None:
        self.registry = CollectorRegistry()
        labels = {"consumer": consumer}

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            metric = Counter(name, doc, ["consumer", *extra], registry=self.registry)
            return metric if extra else metric.labels(**labels)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, ["consumer"], registry=self.registry).labels(**labels)

        self.delivered = counter("lineage_consumer_delivered", "Events the target accepted.")
        self.retried = counter("lineage_consumer_retried", "Delivery attempts retried.")
        self.dead_lettered = counter(
            "lineage_consumer_dead_lettered",
            "Messages sent to the dead-letter topic, by why (poison, refused).",
            ("why",),
        )
        self.dead_letter_write_failures = counter(
            "lineage_consumer_dead_letter_write_failures",
            "Attempts to write a dead letter that failed (retried; its offset is held).",
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
        self.circuit_open = gauge(
            "lineage_consumer_circuit_open",
            "1 while the circuit breaker holds deliveries back (target down).",
        )
        # Read on scrape from the daemon (set_function): partitions held now, and whether
        # its Kafka answers — a consumer that lost its partitions has no lag to show.
        self.assigned_partitions = gauge(
            "lineage_consumer_assigned_partitions",
            "Partitions assigned to the consumer now (0: it delivers nothing).",
        )
        self.dead_letters_waiting = gauge(
            "lineage_consumer_dead_letters_waiting",
            "Dead letters that cannot be written now, each holding its partition's offset.",
        )
        self.kafka_unreachable = gauge(
            "lineage_consumer_kafka_unreachable",
            "1 while no broker of the consumer's cluster answers.",
        )
        self.consumer = consumer

    def set_lag(self, topic: str, partition: int, lag: int) -> None:
        self._lag.labels(self.consumer, topic, str(partition)).set(lag)

    def forget_partition(self, topic: str, partition: int) -> None:
        with contextlib.suppress(KeyError):
            self._lag.remove(self.consumer, topic, str(partition))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class DaemonsCollector(Collector):
    """The metrics of several daemons as one set of families (one per metric name), so
    that they can sit in another registry beside each other."""

    def __init__(self, daemons: Sequence[ConsumerMetrics]) -> None:
        self._daemons = list(daemons)

    def describe(self) -> list[Metric]:
        # Nothing to check at registration: the names are the daemons' own.
        return []

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, Metric] = {}
        for daemon in self._daemons:
            for family in daemon.registry.collect():
                into = merged.get(family.name)
                if into is None:
                    merged[family.name] = family
                else:
                    into.samples.extend(family.samples)
        yield from merged.values()
