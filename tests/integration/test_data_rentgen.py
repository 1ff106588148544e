"""routing_rules/examples/data-rentgen.yaml against a real broker: what Data.Rentgen reads.

Data.Rentgen (a lineage server that reads OpenLineage from Kafka) consumes plain
RunEvent JSON from ``input.runs``, RunEvents only, and sends any run id that is not a
UUIDv7 to its malformed topic. This test reads ``input.runs`` the way it does (the value
as JSON, key and headers ignored) and checks it would accept every message, and that
nothing it would refuse is lost.
"""

from __future__ import annotations

import uuid

import orjson
import pytest

from spark_emitter.run_ids import uuid7
from tests.integration.test_lineage_endpoint import post
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.paths import REPO
from tests.support.sample_events import dataset_event, job_event, rich_run_event

pytestmark = pytest.mark.integration

RULES = REPO / "routing_rules" / "examples" / "data-rentgen.yaml"


async def test_only_uuid7_run_events_reach_input_runs_and_everything_reaches_the_lineage_topic(
    start_proxy, broker, topic
):
    v7, v4 = rich_run_event(run_id=uuid7()), rich_run_event(run_id=str(uuid.uuid4()))
    batch = [v7, v4, job_event(), dataset_event()]
    async with start_proxy(routing={"rules": RULES}) as url:
        status, body, _ = await post(f"{url}/api/v1/lineage/batch", batch)
    assert status == 200 and body["summary"]["successful"] == 4

    lineage = read_all_produced_so_far(broker.bootstrap_servers, topic)
    assert len(lineage) == 4
    input_runs = read_all_produced_so_far(broker.bootstrap_servers, "input.runs")
    events = [orjson.loads(r.value) for r in input_runs]  # Data.Rentgen parses the value alone
    assert v7 in events and v4 not in events
    for event in events:  # (other tests' Spark runs may be here too)
        assert "run" in event and "job" in event, "RunEvents only"
        assert uuid.UUID(event["run"]["runId"]).version == 7
