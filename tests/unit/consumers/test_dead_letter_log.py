"""A consumer logs dead letters at a limited rate: one line per kind per 10 s, saying
how many like it were held back, while every one is counted."""

from __future__ import annotations

import asyncio
import logging

from confluent_kafka import Message

from consumers.config import ConsumerConfig
from consumers.daemon import ConsumerDaemon


def test_a_thousand_dead_letters_log_one_line_and_count_all(caplog) -> None:
    config = ConsumerConfig.model_validate(
        {
            "target": {"kind": "http", "url": "http://127.0.0.1:9/x"},
            "dead_letter": {"enabled": False},
        }
    )
    daemon = ConsumerDaemon("c", config, bootstrap_servers="127.0.0.1:9", default_topic="events")
    caplog.set_level(logging.INFO, logger="consumers.daemon")

    async def dead_letter_all() -> None:
        for offset in range(1000):
            message = Message(topic="events", partition=0, offset=offset)
            await daemon._dead_letter(message, "target said 400", None, "permanent")

    asyncio.run(dead_letter_all())

    lines = [r.getMessage() for r in caplog.records if "dead-lettered" in r.getMessage()]
    assert lines == ["c: events[0]@0 dead-lettered: target said 400"]
    assert daemon.metrics.dead_lettered.labels("c", "permanent")._value.get() == 1000
