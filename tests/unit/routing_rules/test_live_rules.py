"""LiveRules: build destinations from a rules file, swap on reload, keep what did not
change, retire what did, refuse a broken file. Archive destinations only (no broker)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from proxy.config.settings import KafkaConfig
from proxy.destinations.archive.destination import finished_files
from proxy.destinations.registry import DestinationResources
from proxy.ingest.live_rules import LiveRules
from proxy.support.yaml_source import ConfigError
from routing_rules.stats import RoutingStats
from tests.support.sample_events import run_event
from tests.support.waiting import wait_for


def rules_text(second_gzip: bool) -> str:
    return f"""
version: 1
destinations:
  kept: {{kind: archive, directory: kept}}
  changed: {{kind: archive, directory: changed, gzip: {str(second_gzip).lower()}}}
  unused: {{kind: archive, directory: unused}}
default: {{to: [kept, changed]}}
"""


def write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def live(tmp_path: Path) -> LiveRules:
    resources = DestinationResources(KafkaConfig(bootstrap_servers="127.0.0.1:1"), tmp_path)
    return LiveRules(tmp_path / "rules.yaml", resources, RoutingStats(), retire_after_seconds=0)


async def test_reload_keeps_unchanged_destinations_and_retires_changed_ones(tmp_path: Path):
    write(tmp_path / "rules.yaml", rules_text(second_gzip=False))
    rules = live(tmp_path)
    router = await rules.start()
    kept, changed = router.ruleset.default
    assert [d.name for d in rules.destinations] == ["kept", "changed"]  # unused: not built
    event = run_event()
    for destination in (kept, changed):
        await destination.deliver(event, orjson.dumps(event))

    write(tmp_path / "rules.yaml", rules_text(second_gzip=True))
    assert await rules.reload()
    new_kept, new_changed = router.ruleset.default
    assert new_kept is kept and new_changed is not changed
    await wait_for(  # the retired writer is closed in the background
        lambda: bool(list(finished_files(tmp_path / "changed"))),
        what="the retired writer's file finished",
    )
    (done,) = finished_files(tmp_path / "changed")
    assert orjson.loads(done.read_bytes()) == event
    assert list(finished_files(tmp_path / "kept")) == []  # still open, still the same file
    assert rules.stats.reloads == {"success": 1, "failure": 0}
    await rules.close()
    assert len(list(finished_files(tmp_path / "kept"))) == 1


async def test_broken_file_is_refused_and_the_old_rules_keep_serving(tmp_path: Path, caplog):
    write(tmp_path / "rules.yaml", rules_text(second_gzip=False))
    rules = live(tmp_path)
    router = await rules.start()
    before = router.ruleset
    write(tmp_path / "rules.yaml", "version: 1\ndestinations: {}\ndefault: {to: [gone]}\n")
    assert not await rules.reload()
    assert router.ruleset is before
    assert rules.stats.reloads == {"success": 0, "failure": 1}
    (line,) = [r.getMessage() for r in caplog.records if "reload refused" in r.getMessage()]
    assert "rules.yaml:3: default.to.0: unknown destination 'gone'" in line
    await rules.close()


async def test_a_destination_that_cannot_start_refuses_the_file(tmp_path: Path):
    (tmp_path / "blocked").write_text("a file where the archive directory should be")
    write(
        tmp_path / "rules.yaml",
        "version: 1\ndestinations:\n  a: {kind: archive, directory: blocked/x}\n"
        "default: {to: [a]}\n",
    )
    with pytest.raises(ConfigError, match="destination 'a'"):
        await live(tmp_path).start()


def test_kafka_destinations_share_a_producer_unless_overrides_differ(tmp_path: Path):
    resources = DestinationResources(
        KafkaConfig(bootstrap_servers="127.0.0.1:1", producer={"linger.ms": 5}), tmp_path
    )
    try:
        shared = resources.producer({})
        assert resources.producer({}) is shared
        assert resources.producer({"linger.ms": 5}) is shared  # same settings after merge
        own = resources.producer({"linger.ms": 50})
        assert own is not shared and own.settings["linger.ms"] == 50
        assert own.settings["acks"] == "all" and own.settings["enable.idempotence"] is True
        assert len(resources.producers) == 2
    finally:
        for producer in resources.producers:
            producer.stop()


async def test_an_unknown_librdkafka_setting_refuses_the_file_with_its_name(tmp_path: Path):
    write(
        tmp_path / "rules.yaml",
        "version: 1\ndestinations:\n  k: {kind: kafka, producer: {linger.mss: 5}}\n"
        "default: {to: [k]}\n",
    )
    rules = live(tmp_path)
    with pytest.raises(ConfigError, match=r"destination 'k': .*linger\.mss"):
        await rules.start()
    await rules.resources.close(0)
