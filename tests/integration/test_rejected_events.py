"""Nothing refused is lost: the built-in rules keep refused events, and replay re-sends them."""

from __future__ import annotations

import uuid

import orjson
import pytest

from consumers.replay import ReplayFilter, replay
from proxy.config.settings import ProxyConfig
from tests.integration.test_lineage_endpoint import post
from tests.support.kafka_reader import Record, read_all_produced_so_far, read_topic
from tests.support.sample_events import rich_run_event

pytestmark = pytest.mark.integration

REJECTED_TOPIC = "openlineage.events.rejected"  # routing_rules/default.yaml


def _records_about(bootstrap: str, run_id: str) -> list[Record]:
    """Records of the shared rejected topic produced so far that carry ``run_id``."""
    records = read_all_produced_so_far(bootstrap, REJECTED_TOPIC)
    return [r for r in records if run_id.encode() in r.value]


async def test_refused_events_are_kept_with_reasons_in_kafka_and_archive_then_replayed_after_a_fix(
    start_proxy, broker, topic, tmp_path
):
    naive = rich_run_event()
    naive["eventTime"] = "2026-11-23T10:00:00"
    broken = rich_run_event()
    broken["run"]["runId"] = f"not-a-uuid-{uuid.uuid4()}"
    # Strict mode refuses the naive time: the cause a later fix (repair mode) removes.
    async with start_proxy(
        validation={"mode": "strict"}, routing={"archive_root": tmp_path}
    ) as url:
        assert (await post(f"{url}/api/v1/lineage", naive))[0] == 400
        status, body, _ = await post(f"{url}/api/v1/lineage/batch", [rich_run_event(), broken])
        assert status == 200 and body["summary"]["failed"] == 1

    [kept] = _records_about(broker.bootstrap_servers, naive["run"]["runId"])
    envelope = orjson.loads(kept.value)
    assert envelope["event"] == naive
    assert envelope["rejection"]["status"] == 400
    assert envelope["rejection"]["details"] == [
        {"pointer": "/eventTime", "message": "not a valid RFC 3339 date-time"}
    ]
    [kept_from_batch] = _records_about(broker.bootstrap_servers, broken["run"]["runId"])
    assert orjson.loads(kept_from_batch.value)["event"] == broken

    archived = [
        orjson.loads(line)
        for path in sorted((tmp_path / "rejected").glob("dt=*/namespace=*/*.jsonl"))
        for line in path.read_bytes().splitlines()
    ]
    assert [a["event"] for a in archived] == [naive, broken]

    # The fix: a proxy that repairs. Replay sends the refused events to it again.
    async with start_proxy() as fixed_url:
        config = ProxyConfig.model_validate(
            {
                "consumers": {
                    "proxy": {"target": {"kind": "http", "url": f"{fixed_url}/api/v1/lineage"}}
                }
            }
        )
        result = await replay(
            config.consumers, config.kafka, tmp_path / "rejected", "proxy", ReplayFilter(), None
        )
    assert (result.sent, result.failed) == (1, 1)  # the bad runId is still refused
    landed = [orjson.loads(r.value) for r in read_topic(broker.bootstrap_servers, topic, expect=2)]
    replayed = [e for e in landed if e["run"]["runId"] == naive["run"]["runId"]]
    assert [e["eventTime"] for e in replayed] == ["2026-11-23T10:00:00Z"]
