"""A spooled record Kafka refuses for good is set aside, and the drain goes on (issue 25).

Real broker (the session's ``broker``), real spool files. The oversized record stands for
one spooled before a limit was lowered (or by an older version that did not count key
and headers): librdkafka refuses it with MSG_SIZE_TOO_LARGE however often it is sent."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
import yaml

from proxy.destinations.kafka.spool import DEAD_LETTER_FILE, REFUSED_HEADER, Spool, decode_records
from proxy.destinations.kafka.spool_drainer import KafkaSpool, SpoolMetrics
from proxy.kafka.producer import KafkaProducer
from proxy.kafka.settings import producer_settings
from tests.support.cli import run_cli
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

DRAIN_SECONDS = 30.0


async def test_a_record_kafka_refuses_for_good_is_set_aside_and_later_ones_arrive_in_order(
    broker, topic, tmp_path: Path
):
    directory = tmp_path / "spool" / "cluster"
    left = Spool(directory, 1 << 30, 1 << 24)  # what an earlier run left behind
    await left.open()
    headers = [("ol_kind", b"RunEvent")]
    await left.append(topic, "run:a/b", headers, b'{"n": 1}')
    await left.append(topic, "run:a/b", headers, b'{"n": "' + b"x" * 1_200_000 + b'"}')
    await left.append(topic, "run:a/b", headers, b'{"n": 3}')
    await left.close()

    producer = KafkaProducer(producer_settings(broker.bootstrap_servers))
    producer.start()
    await asyncio.to_thread(producer.ensure_topics, {topic: (1, 1)})
    kafka_spool = KafkaSpool(Spool(directory, 1 << 30, 1 << 24), producer)
    await kafka_spool.start()
    try:
        drained = await eventually(lambda: kafka_spool.spool.events == 0, DRAIN_SECONDS)
        assert drained, "the drain stopped at the refused record"
        status = kafka_spool.status()
        metrics = {m.name: m for m in SpoolMetrics(lambda: [kafka_spool]).collect()}
    finally:
        await kafka_spool.close()
        producer.stop()
    records = await asyncio.to_thread(read_all_produced_so_far, broker.bootstrap_servers, topic)
    assert [r.value for r in records if r.key == "run:a/b"] == [b'{"n": 1}', b'{"n": 3}']
    [dead], _ = decode_records((directory / DEAD_LETTER_FILE).read_bytes(), 0)
    assert dead.key == "run:a/b" and len(dead.value) > 1_200_000
    assert b"too large" in dict(dead.headers)[REFUSED_HEADER].lower()
    assert status["dead_letters"] == 1 and status["dead_letter_file"].endswith(DEAD_LETTER_FILE)
    [sample] = metrics["lineage_proxy_spool_dead_lettered"].samples
    assert sample.value == 1
    assert not sample.labels["spool"].startswith("/")  # no absolute path in /metrics
    # A restart counts the dead letters already set aside.
    again = Spool(directory, 1 << 30, 1 << 24)
    await again.open()
    assert again.dead_letters == 1 and again.events == 0
    await again.close()

    # What the operator runs (docs/operate/runbooks.md#lineageproxyspooldeadlettered).
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "kafka": {
                    "bootstrap_servers": broker.bootstrap_servers,
                    "spool": {"directory": str(tmp_path / "spool")},
                }
            }
        )
    )
    code, out, err = await run_cli(
        "spool", "dead-letters", "--format", "json", "--config", str(config)
    )
    assert code == 0, err
    [listed] = [orjson.loads(line) for line in out.splitlines()]
    assert listed["spool"] == str(directory) and listed["topic"] == topic
    assert listed["key"] == "run:a/b" and "too large" in listed["reason"].lower()
    assert listed["event"] == {"n": "x" * 1_200_000}  # the event itself, to fix and resend
    code, out, _ = await run_cli("spool", "dead-letters", "--config", str(config))
    assert code == 0 and out.count("\n") == 1 and "run:a/b" in out
