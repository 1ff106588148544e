"""compose/ cannot run here (no container engine): check what can be checked without one.

The compose file parses, runs the images the design names, and every config file it
mounts loads with our own config loader; the consumer it starts is one that config
declares; the image it builds has a Dockerfile.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from proxy.config import load_config
from tests.conftest import REPO

COMPOSE = REPO / "compose"


def _compose() -> dict:
    return yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())


def test_stack_has_kafka_kraft_proxy_consumer_and_marquez():
    services = _compose()["services"]
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert "controller" in services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"]
    assert services["marquez"]["image"].startswith("marquezproject/marquez:")
    assert services["marquez-web"]["image"].startswith("marquezproject/marquez-web:")
    assert services["marquez-db"]["image"].startswith("postgres:")
    build = services["proxy"]["build"]
    assert (COMPOSE / build["context"] / build["dockerfile"]).resolve().is_file()
    assert services["consumer-marquez"]["image"] == services["proxy"]["image"]


def test_mounted_configs_load_and_name_the_consumers_the_services_run():
    services = _compose()["services"]
    for name in ("proxy", "consumer-marquez"):
        service = services[name]
        mounts = {
            target: COMPOSE / source
            for source, target, *_ in (v.split(":") for v in service["volumes"])
            if source.startswith("./")
        }
        command = service["command"]
        config_path = mounts[command[command.index("--config") + 1]]
        config = load_config(config_path, environ={})
        advertised = services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
        assert f"//{config.kafka.bootstrap_servers}" in advertised
        if command[0] == "consume":
            consumer = config.consumers[command[1]]
            assert consumer.target.kind == "marquez"
            assert consumer.target.url.split("//")[1].split(":")[0] in services
            assert f"{consumer.status_port}:{consumer.status_port}" in service["ports"]
        else:
            assert config.server.host == "0.0.0.0"


def test_every_relative_mount_exists():
    for service in _compose()["services"].values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert Path(COMPOSE / source).exists(), source
