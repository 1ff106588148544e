"""EventPipeline.deliver_many: a batch goes to each destination in one call, and every
event's outcome is its own (one event's failure never fails its neighbours)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from proxy.destinations import DeliveryError, Destination
from proxy.ingest.pipeline import BestEffortQueue, EventPipeline
from proxy.metrics.process import ProxyMetrics
from proxy.validation import EventValidator
from proxy.validation.repairs import EventRepairer
from routing_rules.ruleset import Route, Trace
from tests.support.sample_events import run_event


class BatchDestinationDouble(Destination):
    """A durable destination that takes batches (``deliver_many``) and refuses, as
    retriable, the events whose job name is in ``refuse``; records each call."""

    durable = True

    def __init__(self, name: str, refuse: frozenset[str] = frozenset()) -> None:
        self.name = name
        self.refuse = refuse
        self.calls: list[list[str]] = []

    async def deliver_many(
        self, items: Sequence[tuple[dict[str, Any], bytes]]
    ) -> list[bool | DeliveryError | None]:
        self.calls.append([event["job"]["name"] for event, _ in items])
        return [
            DeliveryError(self.name, "disk full", retriable=True)
            if event["job"]["name"] in self.refuse
            else None
            for event, _ in items
        ]

    async def start(self) -> None: ...

    async def deliver(self, event: dict[str, Any], payload: bytes) -> None:
        raise AssertionError("the pipeline delivers a batch in one deliver_many call")

    async def ready(self) -> bool:
        return True

    async def close(self) -> None: ...


class SingleDestinationDouble(Destination):
    """A durable destination with ``deliver`` only (like HTTP): one call per event;
    answers True ("spooled") for every event."""

    durable = True

    def __init__(self, name: str) -> None:
        self.name = name
        self.delivered: list[str] = []

    async def deliver(self, event: dict[str, Any], payload: bytes) -> bool:
        self.delivered.append(event["job"]["name"])
        return True

    async def start(self) -> None: ...

    async def ready(self) -> bool:
        return True

    async def close(self) -> None: ...


class RouterDouble:
    """Routes every event to the same destinations."""

    def __init__(self, *destinations: Any) -> None:
        self.destinations: tuple[Destination, ...] = destinations

    def route(self, event: dict[str, Any], trace: Trace | None = None) -> Route[Destination]:
        return Route(event, self.destinations)

    def route_rejected(self, envelope: dict[str, Any]) -> Route[Destination]:
        return Route(envelope, ())


def _pipeline(router: RouterDouble) -> EventPipeline:
    metrics = ProxyMetrics()
    return EventPipeline(
        EventValidator(),
        router,
        metrics,
        BestEffortQueue(1, 1, metrics),
        EventRepairer(()),
    )


async def test_a_batch_reaches_each_destination_in_one_call_and_failures_stay_per_event():
    archive = BatchDestinationDouble("archive", refuse=frozenset({"job-1"}))
    http = SingleDestinationDouble("http")
    pipeline = _pipeline(RouterDouble(archive, http))
    events = [run_event(name=f"job-{i}") for i in range(3)]

    outcomes = await pipeline.deliver_many(events)

    assert archive.calls == [["job-0", "job-1", "job-2"]]
    assert http.delivered == ["job-0", "job-1", "job-2"]
    assert outcomes[0] is True and outcomes[2] is True  # http said spooled
    assert isinstance(outcomes[1], DeliveryError)
    assert outcomes[1].destination == "archive" and outcomes[1].retriable


async def test_a_single_event_that_a_destination_refuses_raises_its_error():
    pipeline = _pipeline(RouterDouble(BatchDestinationDouble("kafka", frozenset({"etl"}))))
    with pytest.raises(DeliveryError) as refused:
        await pipeline.deliver(run_event(name="etl"))
    assert refused.value.destination == "kafka"
    assert await pipeline.deliver(run_event(name="other")) is False
