"""``lineage-proxy spool dead-letters`` on files made here: every spool under
``kafka.spool.directory`` (worker roots included), each record's reason, and a value that
is not JSON shown as text rather than a crash."""

from __future__ import annotations

from pathlib import Path

import orjson
import yaml

from proxy.destinations.kafka.spool import DEAD_LETTER_FILE, REFUSED_HEADER, encode_record
from tests.support.cli import run_cli


def _dead_letters(directory: Path, *values: bytes) -> None:
    directory.mkdir(parents=True)
    reason = [(REFUSED_HEADER, b"Broker: Message size too large")]
    records = b"".join(
        encode_record("events", "run:a/b", reason, value, 1_795_000_000.0) for value in values
    )
    (directory / DEAD_LETTER_FILE).write_bytes(records)


async def test_every_spools_dead_letters_are_listed_with_why(tmp_path: Path):
    root = tmp_path / "spool"
    _dead_letters(root / "default", b'{"eventType": "START"}')
    _dead_letters(root / "worker-1" / "default", b"not json \xff")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"kafka": {"spool": {"directory": str(root)}}}))

    code, out, err = await run_cli(
        "spool", "dead-letters", "--format", "json", "--config", str(config)
    )
    assert code == 0, err
    listed = sorted((orjson.loads(line) for line in out.splitlines()), key=lambda e: e["spool"])
    assert [e["spool"] for e in listed] == [
        str(root / "default"),
        str(root / "worker-1" / "default"),
    ]
    assert listed[0]["event"] == {"eventType": "START"}
    assert listed[1]["value"] == "not json \ufffd"
    assert {e["reason"] for e in listed} == {"Broker: Message size too large"}
    assert listed[0]["spooled_at"].startswith("2026-")

    code, out, err = await run_cli("spool", "dead-letters", "--config", str(config))
    assert code == 0 and len(out.splitlines()) == 2, out + err
