"""compose/ cannot run here (no container engine): check what can be checked without one.

The compose file runs the images the design names; every config file it mounts loads with
our own loader, with the service's environment; everything a service writes (our config's
archive, journals, data directories; Kafka's log.dirs; Postgres' PGDATA) lies on a
writable named volume, which for our image the Dockerfile creates owned by its non-root
user; every environment variable is one the image documents; the health checks probe
the ports the services listen on; the Dockerfile is pinned and has a HEALTHCHECK.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest
import yaml

from proxy.config.settings import ProxyConfig, load_config
from tests.support.config_paths import CONFIG_INPUTS, config_leaves, used_paths
from tests.support.paths import REPO

COMPOSE = REPO / "compose"
DOCKERFILE = COMPOSE / "Dockerfile"

# Broker properties (Kafka's broker configuration docs) that the stack sets through the
# apache/kafka image's KAFKA_<PROPERTY> variables.
KAFKA_BROKER_PROPERTIES = {
    "node.id",
    "process.roles",
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "controller.listener.names",
    "controller.quorum.voters",
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "group.initial.rebalance.delay.ms",
    "auto.create.topics.enable",
    "log.dirs",
    "num.partitions",
    "default.replication.factor",
    "min.insync.replicas",
}


def _kafka_property(variable: str) -> str | None:
    """apache/kafka image docs: KAFKA_ + the property with `.`→`_`, `_`→`__`, `-`→`___`."""
    if not variable.startswith("KAFKA_"):
        return None
    name = variable.removeprefix("KAFKA_").lower()
    name = name.replace("___", "\0").replace("__", "\1").replace("_", ".")
    return name.replace("\0", "-").replace("\1", "_")


@dataclass(frozen=True)
class ImageFacts:
    """What an image's documentation says: its settings and where it keeps its state."""

    settings: frozenset[str]
    state_dirs: Callable[[Mapping[str, str]], list[str]]
    property_setting: Callable[[str], str | None] = lambda _: None
    properties: frozenset[str] = frozenset()


IMAGES = {
    # Apache Kafka's docker/examples README and launch scripts: KAFKA_<property>, the
    # image's own variables, and log.dirs defaulting to /tmp/kraft-combined-logs.
    "apache/kafka": ImageFacts(
        settings=frozenset(
            {
                "CLUSTER_ID",
                "KAFKA_HEAP_OPTS",
                "KAFKA_OPTS",
                "KAFKA_JMX_OPTS",
                "KAFKA_JMX_PORT",
                "KAFKA_LOG4J_ROOT_LOGLEVEL",
                "KAFKA_LOG4J_LOGGERS",
            }
        ),
        state_dirs=lambda env: env.get("KAFKA_LOG_DIRS", "/tmp/kraft-combined-logs").split(","),
        property_setting=_kafka_property,
        properties=frozenset(KAFKA_BROKER_PROPERTIES),
    ),
    # The postgres image's documented variables; its data lives in PGDATA.
    "postgres": ImageFacts(
        settings=frozenset(
            {
                "POSTGRES_USER",
                "POSTGRES_PASSWORD",
                "POSTGRES_DB",
                "POSTGRES_INITDB_ARGS",
                "POSTGRES_INITDB_WALDIR",
                "POSTGRES_HOST_AUTH_METHOD",
                "PGDATA",
            }
        ),
        state_dirs=lambda env: [env.get("PGDATA", "/var/lib/postgresql/data")],
    ),
    # Marquez's marquez.yml (${VAR:-default} placeholders) and entrypoint; its state is in
    # Postgres. Search (OpenSearch) is on unless SEARCH_ENABLED=false.
    "marquezproject/marquez": ImageFacts(
        settings=frozenset(
            {
                "MARQUEZ_PORT",
                "MARQUEZ_ADMIN_PORT",
                "MARQUEZ_CONFIG",
                "POSTGRES_HOST",
                "POSTGRES_PORT",
                "POSTGRES_DB",
                "POSTGRES_USER",
                "POSTGRES_PASSWORD",
                "MIGRATE_ON_STARTUP",
                "GRAPHQL_ENABLED",
                "LOG_LEVEL",
                "SEARCH_ENABLED",
                "SEARCH_SCHEME",
                "SEARCH_HOST",
                "SEARCH_PORT",
                "SEARCH_USERNAME",
                "SEARCH_PASSWORD",
            }
        ),
        state_dirs=lambda env: [],
    ),
    # Marquez web: where the API is and its own port; stateless.
    "marquezproject/marquez-web": ImageFacts(
        settings=frozenset({"MARQUEZ_HOST", "MARQUEZ_PORT", "WEB_PORT"}),
        state_dirs=lambda env: [],
    ),
}


@dataclass(frozen=True)
class Mount:
    source: str
    target: PurePosixPath
    read_only: bool

    @property
    def named_volume(self) -> bool:
        return not self.source.startswith(("./", "../", "/"))

    def holds(self, path: PurePosixPath) -> bool:
        return path == self.target or self.target in path.parents


def _compose() -> dict:
    return yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())


def _mounts(service: dict) -> list[Mount]:
    mounts = []
    for volume in service.get("volumes", []):
        source, target, *mode = volume.split(":")
        mounts.append(Mount(source, PurePosixPath(target), "ro" in mode))
    return mounts


def _environment(service: dict) -> dict[str, str]:
    return {key: str(value) for key, value in (service.get("environment") or {}).items()}


def _our_services() -> dict[str, dict]:
    services = _compose()["services"]
    ours = services["proxy"]["image"]
    return {name: s for name, s in services.items() if s["image"] == ours}


def _image_name(service: dict) -> str:
    return service["image"].rsplit(":", 1)[0]


def _writable_volume(service: dict, path: PurePosixPath) -> Mount | None:
    return next(
        (m for m in _mounts(service) if m.named_volume and not m.read_only and m.holds(path)),
        None,
    )


@dataclass(frozen=True)
class RunningConfig:
    """Our config as a service sees it: loaded with its environment, paths as in the
    container (the loader resolves relative paths against the host's compose/ folder)."""

    config: ProxyConfig
    host_dir: Path
    container_dir: PurePosixPath

    def in_container(self, path: Path) -> PurePosixPath:
        if path.is_relative_to(self.host_dir):
            return self.container_dir / path.relative_to(self.host_dir).as_posix()
        return PurePosixPath(path.as_posix())


def _running_config(service: dict) -> RunningConfig:
    command = service["command"]
    target = PurePosixPath(command[command.index("--config") + 1])
    mount = next(m for m in _mounts(service) if m.target == target)
    host = (COMPOSE / mount.source).resolve()
    config = load_config(host, environ=_environment(service))
    return RunningConfig(config, host.parent, target.parent)


def _config_paths(service: dict) -> tuple[RunningConfig, dict[str, PurePosixPath]]:
    running = _running_config(service)
    paths = used_paths(running.config, service["command"])
    return running, {name: running.in_container(path) for name, path in paths.items()}


def _dockerfile_state_dirs() -> set[PurePosixPath]:
    """Folders the Dockerfile creates owned by the image's user (its home included)."""
    text = DOCKERFILE.read_text()
    user = re.search(r"^USER (\S+)", text, re.M)
    assert user, "the image must not run as root"
    owned = re.findall(rf"install -d -o {user[1]} -g {user[1]} ([^\n&\\]+)", text)
    home = re.findall(rf"--home-dir (\S+) --create-home {user[1]}", text)
    return {PurePosixPath(p) for p in " ".join(owned + home).split()}


def test_stack_has_kafka_kraft_proxy_consumer_and_marquez():
    services = _compose()["services"]
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert "controller" in services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"]
    assert services["marquez"]["image"].startswith("marquezproject/marquez:")
    assert services["marquez-web"]["image"].startswith("marquezproject/marquez-web:")
    assert services["marquez-db"]["image"].startswith("postgres:")
    build = services["proxy"]["build"]
    assert (COMPOSE / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE
    assert services["consumer-marquez"]["image"] == services["proxy"]["image"]


def test_mounted_configs_load_and_name_the_consumers_the_services_run():
    services = _compose()["services"]
    advertised = services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    for service in _our_services().values():
        config = _running_config(service).config
        assert f"//{config.kafka.bootstrap_servers}" in advertised
        command = service["command"]
        if command[0] == "consume":
            consumer = config.consumers[command[1]]
            assert consumer.target.kind == "marquez"
            assert consumer.target.url.split("//")[1].split(":")[0] in services
            assert f"{consumer.status_port}:{consumer.status_port}" in service["ports"]
        else:
            assert config.server.host == "0.0.0.0"
            assert f"{config.server.port}:{config.server.port}" in service["ports"]


def test_every_relative_mount_exists():
    for service in _compose()["services"].values():
        for mount in _mounts(service):
            if not mount.named_volume:
                assert (COMPOSE / mount.source).exists(), mount.source


@pytest.mark.parametrize("name", sorted(_our_services()))
def test_everything_our_services_write_is_on_a_volume_the_image_user_owns(name):
    service = _our_services()[name]
    running, paths = _config_paths(service)
    state_dirs = _dockerfile_state_dirs()
    assert paths, "the config names no paths: the walk over it is broken"
    for field, path in paths.items():
        if field in CONFIG_INPUTS:
            assert any(m.holds(path) for m in _mounts(service)), f"{field}: {path} not mounted"
            continue
        assert path.is_absolute(), f"{field}: {path}"
        mount = _writable_volume(service, path)
        assert mount is not None, f"{name}: {field} = {path} is not on a writable volume"
        assert mount.target in state_dirs, f"{mount.target}: not created for the image's user"
    for mount in _mounts(service):
        if mount.named_volume:
            assert mount.target in state_dirs, f"{mount.target}: the volume would be root's"
    assert running.container_dir == PurePosixPath("/etc/lineage-proxy")


def test_proxy_volume_holds_the_spool_directory_created_for_the_image_user():
    spool = PurePosixPath("/var/lib/lineage-proxy/spool")
    assert spool in _dockerfile_state_dirs()
    assert _writable_volume(_compose()["services"]["proxy"], spool) is not None


@pytest.mark.parametrize("name", ["kafka", "marquez-db", "marquez", "marquez-web"])
def test_other_images_keep_their_state_on_a_volume_and_use_documented_settings(name):
    service = _compose()["services"][name]
    facts = IMAGES[_image_name(service)]
    env = _environment(service)
    for variable in env:
        if variable in facts.settings:
            continue
        prop = facts.property_setting(variable)
        assert prop in facts.properties, f"{name}: {variable} is not a setting of the image"
    for directory in facts.state_dirs(env):
        path = PurePosixPath(directory)
        assert _writable_volume(service, path), f"{name}: {path} is not on a volume: lost"
    for mount in _mounts(service):
        if mount.named_volume:
            assert any(mount.holds(PurePosixPath(d)) for d in facts.state_dirs(env)), (
                f"{name}: volume at {mount.target} holds nothing the image writes"
            )


def test_kafka_env_names_map_to_broker_properties():
    assert _kafka_property("KAFKA_LOG_DIRS") == "log.dirs"
    assert _kafka_property("KAFKA_ABC__DEF") == "abc_def"
    assert _kafka_property("KAFKA_ABC___DEF") == "abc-def"
    assert _kafka_property("CLUSTER_ID") is None


def test_marquez_search_is_off_unless_the_stack_runs_opensearch():
    services = _compose()["services"]
    env = _environment(services["marquez"])
    opensearch = [n for n, s in services.items() if "opensearch" in s["image"]]
    if env.get("SEARCH_ENABLED", "true").lower() != "false":
        assert env.get("SEARCH_HOST", "opensearch") in opensearch


def test_our_services_env_is_config_overrides_or_secrets_the_config_names():
    for name, service in _our_services().items():
        config = _running_config(service).config
        secrets = {
            value
            for field, value in config_leaves(config)
            if field.endswith("_env") and isinstance(value, str)
        }
        for variable in _environment(service):
            assert variable.startswith("LINEAGE_PROXY__") or variable in secrets, (
                f"{name}: {variable} is neither an override nor a secret the config reads"
            )


def _healthcheck_port(service: dict) -> int:
    test = " ".join(service["healthcheck"]["test"])
    match = re.search(r"//(?:127\.0\.0\.1|localhost):(\d+)/", test)
    assert match, test
    return int(match[1])


def test_health_checks_probe_the_ports_our_services_listen_on():
    for service in _our_services().values():
        config = _running_config(service).config
        command = service["command"]
        if command[0] == "consume":
            expected = config.consumers[command[1]].status_port
        else:
            expected = config.server.port
            assert "/readyz" in " ".join(service["healthcheck"]["test"])
        assert _healthcheck_port(service) == expected


def test_dockerfile_is_pinned_non_root_with_a_healthcheck():
    text = DOCKERFILE.read_text()
    base = re.search(r"^FROM (\S+)", text, re.M)
    assert base and re.fullmatch(r"python:3\.11\.\d+-slim(-[a-z]+)?", base[1]), base
    assert re.search(r"^HEALTHCHECK .*\n?.*CMD", text, re.M)
    assert "/healthz" in text
    user = re.search(r"^USER (\S+)", text, re.M)
    assert user and user[1] not in ("root", "0")


def test_dockerignore_keeps_local_state_out_and_what_the_image_copies_in():
    ignored = {
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".git", ".venv", "var"} <= ignored
    copied = re.findall(r"^COPY ([^\n]+) \S+$", DOCKERFILE.read_text(), re.M)
    for source in " ".join(copied).split():
        assert source not in ignored and (REPO / source).exists(), source
