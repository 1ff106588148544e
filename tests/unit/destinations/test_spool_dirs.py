"""Which cluster a spool left on disk goes to: the instance's own (``default``) to the
configured cluster whatever its address, an older version's (named after an address) to
that address if configured else to the configured cluster, one recorded for a cluster
the config does not name to nobody (it is named at start instead)."""

from __future__ import annotations

from pathlib import Path

from proxy.destinations.kafka.spool_dirs import (
    cluster_for,
    record_cluster,
    recorded_cluster,
    spool_directory,
)

CONFIGURED = "kafka-1:9092,kafka-2:9092"


def test_the_configured_cluster_spools_in_default_whatever_its_address(tmp_path: Path):
    assert spool_directory(tmp_path, "127.0.0.1:9", "127.0.0.1:9") == tmp_path / "default"
    assert spool_directory(tmp_path, CONFIGURED, CONFIGURED) == tmp_path / "default"
    assert spool_directory(tmp_path, "other:9092", CONFIGURED) == tmp_path / "other_9092"


def test_default_goes_to_the_configured_cluster_even_if_recorded_for_a_typo(tmp_path: Path):
    record_cluster(tmp_path / "default", "127.0.0.1:9")
    assert recorded_cluster(tmp_path / "default") == "127.0.0.1:9"
    assert cluster_for(tmp_path / "default", CONFIGURED, ()) == CONFIGURED


def test_an_older_versions_spool_goes_to_its_address_if_configured_else_to_the_configured(
    tmp_path: Path,
):
    assert cluster_for(tmp_path / "other_9092", CONFIGURED, {"other:9092"}) == "other:9092"
    assert cluster_for(tmp_path / "127.0.0.1_9", CONFIGURED, {"other:9092"}) == CONFIGURED


def test_a_spool_recorded_for_a_cluster_not_configured_is_not_forwarded(tmp_path: Path):
    record_cluster(tmp_path / "kafka-b_9092", "kafka-b:9092")
    assert cluster_for(tmp_path / "kafka-b_9092", CONFIGURED, ()) is None
    assert cluster_for(tmp_path / "kafka-b_9092", CONFIGURED, {"kafka-b:9092"}) == "kafka-b:9092"
