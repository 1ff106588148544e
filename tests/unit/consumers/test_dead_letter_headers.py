"""What a dead-lettered message carries: its own headers (null values too) plus why."""

from __future__ import annotations

from confluent_kafka import Message

from consumers.dead_letter import dead_letter_headers
from proxy.destinations.http.destination import HttpDeliveryError


def test_null_source_header_is_kept_and_earlier_dlq_headers_are_replaced():
    source = Message(
        topic="lineage",
        partition=2,
        offset=7,
        value=b"{}",
        headers=[("trace", None), ("ol_kind", b"run"), ("dlq_reason", b"older")],
    )
    error = HttpDeliveryError("marquez", "HTTP 422", retriable=False, status=422)

    headers = dead_letter_headers(source, "marquez", "refused", error)

    assert headers[:2] == [("trace", None), ("ol_kind", b"run")]
    assert dict(headers[2:]) == {
        "dlq_reason": b"refused",
        "dlq_consumer": b"marquez",
        "dlq_source_topic": b"lineage",
        "dlq_source_partition": b"2",
        "dlq_source_offset": b"7",
        "dlq_http_status": b"422",
        "dlq_retriable": b"false",
    }
