"""The file system paths a `serve` or `consume NAME` process uses, read from its config:
for deployment tests (compose/, deploy/) that check each lies on a mounted volume."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from proxy.config.settings import ProxyConfig
from proxy.destinations.archive.config import ArchiveDestinationConfig
from routing_rules.loader import BUILTIN_RULES, load_rules_file

__all__ = ["CONFIG_INPUTS", "config_leaves", "used_paths"]

# Config fields the process reads (they must come from a mount or the image); every other
# path in the config is written to.
CONFIG_INPUTS = {
    "routing.rules",
    "validation.extra_schema_dir",
    "server.tls.cert_file",
    "server.tls.key_file",
    "server.tls.client_ca_file",
}


def config_leaves(value: object, dotted: str = "") -> Iterator[tuple[str, object]]:
    """(dotted name, value) of every scalar in a config model, lists and dicts included."""
    if isinstance(value, BaseModel):
        for field in type(value).model_fields:
            yield from config_leaves(getattr(value, field), f"{dotted}.{field}".lstrip("."))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from config_leaves(item, f"{dotted}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from config_leaves(item, f"{dotted}.{i}")
    else:
        yield dotted, value


def _paths(value: object, dotted: str) -> dict[str, Path]:
    return {name: leaf for name, leaf in config_leaves(value, dotted) if isinstance(leaf, Path)}


def used_paths(config: ProxyConfig, command: list[str]) -> dict[str, Path]:
    """For `consume NAME`, that consumer's paths; for `serve`, those of every other
    section, of the consumers it runs in-process and the archive directories of its rules
    file (relative ones under routing.archive_root)."""
    serves = command[0] == "serve"
    paths: dict[str, Path] = {}
    if serves:
        for section in type(config).model_fields:
            if section != "consumers":
                paths.update(_paths(getattr(config, section), section))
    for consumer in config.server.run_consumers if serves else command[1:2]:
        paths.update(_paths(config.consumers[consumer], f"consumers.{consumer}"))
    if serves:
        rules = load_rules_file(config.routing.rules or BUILTIN_RULES)
        for name, destination in rules.destinations.items():
            if isinstance(destination, ArchiveDestinationConfig):
                directory = config.routing.archive_root / destination.directory
                paths[f"rules destination {name}"] = directory
    return paths
