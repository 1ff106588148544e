"""How many messages the consumer thread may fetch next, under the buffering bound."""

from __future__ import annotations

from dataclasses import dataclass

from consumers.kafka_source import KafkaSource


@dataclass
class _Handler:
    released_messages: int = 0
    released_bytes: int = 0


def _source(
    handed: int, handed_bytes: int, largest: int, handler: _Handler | None = None, **bounds: int
) -> KafkaSource:
    source = KafkaSource(
        {},
        ["t"],
        handler=handler or _Handler(),  # type: ignore[arg-type]  # only the counters are read
        max_buffered=bounds.get("messages", 1000),
        max_buffered_bytes=bounds.get("size", 100_000),
        revoke_timeout=1.0,
        poll_batch=500,
    )
    source._handed, source._handed_bytes, source._largest = handed, handed_bytes, largest
    return source


def test_a_poll_takes_only_what_fits_under_the_byte_bound():
    # 60,000 of 100,000 bytes held, messages up to 1,000 bytes: room for 40 more.
    assert _source(60, 60_000, 1_000)._room(paused=False) == 40


def test_a_poll_takes_only_what_fits_under_the_message_bound():
    assert _source(990, 9_900, 10)._room(paused=False) == 10


def test_a_full_buffer_fetches_nothing():
    assert _source(100, 99_500, 1_000)._room(paused=False) == 0
    assert _source(1000, 1_000, 1)._room(paused=False) == 0


def test_released_messages_make_room_again():
    handler = _Handler()
    source = _source(100, 100_000, 1_000, handler)
    assert source._room(paused=False) == 0
    handler.released_messages, handler.released_bytes = 50, 50_000
    assert source.buffered() == (50, 50_000)
    assert source._room(paused=False) == 50


def test_once_paused_fetching_resumes_only_below_half():
    assert _source(60, 60_000, 1_000)._room(paused=True) == 0
    assert _source(40, 40_000, 1_000)._room(paused=True) == 20


def test_a_message_larger_than_the_whole_bound_still_goes_alone():
    assert _source(0, 0, 500_000)._room(paused=False) == 1
    assert _source(1, 500_000, 500_000)._room(paused=False) == 0


def test_before_any_message_is_seen_the_first_poll_assumes_large_messages():
    # Sized as if every message were 1 MiB (Kafka's default largest): 16 MiB → 16 messages.
    assert _source(0, 0, 0, size=16 * 1024 * 1024)._room(paused=False) == 16
