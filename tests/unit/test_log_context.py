"""Log lines carry their context (request id, consumer, destination), and request ids
are kept from the client only when safe to echo."""

from __future__ import annotations

import asyncio
import io
import logging
import sys
from collections.abc import Iterator

import orjson
import pytest

from proxy.support.logs import CONSUMER, DESTINATION, REQUEST_ID, setup_logging
from proxy.web.request_ids import MAX_LENGTH, new_request_id, sane_request_id


@pytest.fixture
def json_log(monkeypatch) -> Iterator[io.StringIO]:
    """The root logger set up as ``logging.json_format: true`` does, writing to a buffer;
    pytest's own handlers are put back afterwards."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    setup_logging("INFO", json_format=True)
    try:
        yield stream
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)


def _lines(stream: io.StringIO) -> list[dict]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_the_context_fields_that_are_set_and_only_those(json_log):
    log = logging.getLogger("test.context")
    log.info("outside any context")
    token = REQUEST_ID.set("req-42")
    try:
        log.warning("refused something")
        log.warning("a delivery failed", extra={"destination": "kafka-main"})
    finally:
        REQUEST_ID.reset(token)
    plain, refused, failed = _lines(json_log)
    assert plain["message"] == "outside any context"
    assert not {"request_id", "consumer", "destination"} & set(plain)
    assert refused["request_id"] == "req-42" and "destination" not in refused
    assert failed["request_id"] == "req-42" and failed["destination"] == "kafka-main"


def test_tasks_started_by_a_consumer_log_with_its_name(json_log):
    async def daemon() -> None:
        CONSUMER.set("to-marquez")
        DESTINATION.set("marquez")
        # A lane task and a plain thread-free callback, as the daemon starts them.
        await asyncio.create_task(lane())

    async def lane() -> None:
        logging.getLogger("consumers.daemon").warning("dead-lettered")

    asyncio.run(daemon())
    logging.getLogger("consumers.daemon").info("after the daemon")
    inside, after = _lines(json_log)
    assert inside["consumer"] == "to-marquez" and inside["destination"] == "marquez"
    assert "consumer" not in after


def test_text_lines_end_with_the_context_fields(monkeypatch):
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    setup_logging("INFO")
    token = REQUEST_ID.set("abc-1")
    try:
        logging.getLogger("test.text").warning("refused")
    finally:
        REQUEST_ID.reset(token)
        root.handlers[:], level = saved
        root.setLevel(level)
    assert stream.getvalue().rstrip().endswith("refused [request_id=abc-1]")


@pytest.mark.parametrize(
    "value",
    ["a b", "x" * (MAX_LENGTH + 1), "", "id\r\nSet-Cookie: x", "ünïcode", "<script>"],
)
def test_unsafe_client_request_ids_are_not_kept(value):
    assert sane_request_id(value) is None


@pytest.mark.parametrize("value", ["req-1", "x" * MAX_LENGTH, "3f2a:b/c=d+e@f.g_h"])
def test_safe_client_request_ids_are_kept(value):
    assert sane_request_id(value) == value


def test_generated_request_ids_are_distinct_and_sane():
    ids = {new_request_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(sane_request_id(i) == i for i in ids)
