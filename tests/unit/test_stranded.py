"""The record a preStop drain that gave up leaves on the volume
(proxy/destinations/kafka/stranded.py), as
the next proxy on that volume reports it: the gauges alert LineageProxySpoolStranded
reads, while the events are not all in Kafka, and gone — with the record — once they
are."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from prometheus_client import CollectorRegistry

from proxy.destinations.kafka.spool import Spool
from proxy.destinations.kafka.stranded import (
    RECORD,
    StrandedSpool,
    clear_if_drained,
    read_record,
    write_record,
)
from tests.support.cli import run_cli
from tests.support.waiting import wait_for


def _gauges(collector: StrandedSpool) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(collector)
    return {s.name: s.value for family in registry.collect() for s in family.samples}


async def test_the_next_process_reports_the_record_until_kafka_has_every_event(
    tmp_path: Path, caplog
):
    """Seen failing before the record existed (no module, no gauge: a volume holding
    acknowledged events of a pod that went reported nothing), and with the record kept
    after the drain (clear_if_drained not removing it)."""
    root = tmp_path / "spool"
    spool = Spool(root / "default", max_bytes=1 << 20, segment_bytes=1 << 16)
    await spool.open()
    for n in range(3):
        await spool.append("openlineage.events", f"run:ns/job{n}", [], b'{"e": 1}')
    written = write_record(root, [root / "default"], pod="lp-lineage-proxy-3", now=1_700_000_000)
    assert written.events == 3
    stranded = StrandedSpool()
    assert _gauges(stranded)["lineage_proxy_spool_stranded_events"] == 0  # before the watch
    caplog.set_level(logging.WARNING, "proxy.destinations.kafka.stranded")
    watch = asyncio.create_task(stranded.watch(root, interval=0.05))
    try:
        await wait_for(lambda: stranded.current is not None, 10, "the record read")
        assert _gauges(stranded) == {
            "lineage_proxy_spool_stranded_events": 3,
            "lineage_proxy_spool_stranded_timestamp_seconds": 1_700_000_000,
        }
        assert "lp-lineage-proxy-3" in caplog.text and "preStop drain gave up" in caplog.text
        # Kafka confirms every record: the drainer deletes the segments, the record goes.
        await spool.confirm(await spool.read(10))
        await asyncio.wait_for(watch, 10)
    finally:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
        await spool.close()
    assert not (root / RECORD).exists()
    assert _gauges(stranded)["lineage_proxy_spool_stranded_events"] == 0


def test_no_record_or_an_unreadable_one_reports_nothing(tmp_path: Path):
    assert read_record(tmp_path) is None and clear_if_drained(tmp_path) is None
    (tmp_path / RECORD).write_text("{not json")
    assert read_record(tmp_path) is None


async def test_spool_list_shows_the_record_while_its_events_wait(tmp_path: Path):
    """What an operator sees in a pod that mounts a claim (docs/operate/runbooks.md): the spool
    and the record of who left it, the record gone once the spool is empty. Seen
    failing with spool list not reading the record."""
    root = tmp_path / "spool"
    spool = Spool(root / "default", max_bytes=1 << 20, segment_bytes=1 << 16)
    await spool.open()
    await spool.append("openlineage.events", "run:ns/job", [], b'{"e": 1}')
    write_record(root, [root / "default"], pod="lp-lineage-proxy-3", now=1_700_000_000)
    config = tmp_path / "config.yaml"
    config.write_text(f"kafka:\n  spool:\n    directory: {root}\n")
    try:
        code, out, _ = await run_cli("spool", "list", "--config", str(config))
        assert code == 0
        assert f"{root / RECORD}: pod lp-lineage-proxy-3's preStop drain gave up at" in out
        assert "leaving 1 events" in out
        code, out, _ = await run_cli("spool", "list", "--format", "json", "--config", str(config))
        assert code == 0 and "stranded" not in out  # JSON lines list spools only
        await spool.confirm(await spool.read(10))
    finally:
        await spool.close()
    code, out, _ = await run_cli("spool", "list", "--config", str(config))
    assert code == 0 and RECORD not in out
