"""UUIDv7 run ids: version, variant, the time in the first 48 bits, randomness."""

from __future__ import annotations

import re
import time
import uuid

import pytest
import yaml

from proxy.validation.formats import UUID_PATTERN
from spark_emitter.run_ids import uuid7
from tests.support.paths import REPO


def test_uuid7_has_version_7_the_rfc_variant_and_the_given_time():
    ms = 1_795_000_000_123
    parsed = uuid.UUID(uuid7(ms))
    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122
    assert parsed.int >> 80 == ms
    assert re.fullmatch(UUID_PATTERN, str(parsed))


def test_uuid7_defaults_to_now_and_sorts_by_time():
    before = time.time_ns() // 1_000_000
    first = uuid7()
    after = time.time_ns() // 1_000_000
    assert before <= uuid.UUID(first).int >> 80 <= after
    assert uuid7(after + 1) > first  # text order is time order across milliseconds


def test_uuid7_is_random_within_one_millisecond():
    assert len({uuid7(1_000) for _ in range(1000)}) == 1000


@pytest.mark.parametrize("ms", [-1, 1 << 48])
def test_uuid7_refuses_times_it_cannot_hold(ms):
    with pytest.raises(ValueError, match="UUIDv7"):
        uuid7(ms)


def test_data_rentgen_example_rule_accepts_our_uuid7_and_refuses_uuid4():
    rules = yaml.safe_load((REPO / "routing_rules/examples/data-rentgen.yaml").read_text())
    pattern = rules["rules"][0]["match"]["fields"]["run.runId"]["regex"]
    assert re.search(pattern, uuid7())
    assert not re.search(pattern, str(uuid.uuid4()))
