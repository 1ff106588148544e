"""What the commands share: exit codes, loading the config, usage errors."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from pydantic import ValidationError

from proxy.config.settings import ConfigError, ProxyConfig, ServerConfig, load_config
from proxy.support.logs import setup_logging

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2

Command = Callable[[argparse.Namespace], int]


def config_from(args: argparse.Namespace) -> ProxyConfig:
    config = load_config(args.config)
    setup_logging(config.logging.level, config.logging.json_format)
    return config


def with_running_embedded_broker(config: ProxyConfig) -> ProxyConfig:
    """``config`` with ``kafka.bootstrap_servers: embedded`` made the address of the broker
    a running ``serve`` embeds (127.0.0.1:kafka.embedded_port), for the commands that talk
    to Kafka beside it (consume, dlq, replay); ConfigError when none listens there."""
    kafka = config.kafka
    if kafka.bootstrap_servers != "embedded":
        return config
    from proxy.server.embedded_broker import listens

    address = f"127.0.0.1:{kafka.embedded_port}"
    if not kafka.embedded_port or not listens(address):
        where = f"on {address}" if kafka.embedded_port else "(kafka.embedded_port is 0)"
        raise ConfigError(
            f"kafka.bootstrap_servers is 'embedded' and no embedded broker listens {where}: "
            "start `lineage-proxy serve` with this config first (its broker is the one "
            "used), run consumers inside it (server.run_consumers), or point "
            "kafka.bootstrap_servers at a real cluster"
        )
    return config.model_copy(
        update={"kafka": kafka.model_copy(update={"bootstrap_servers": address})}
    )


class UsageError(Exception):
    """A bad option value or an environment the command cannot run in: one line, exit 2."""


def with_server_option(config: ProxyConfig, key: str, value: str | int) -> ProxyConfig:
    """``--<key> value`` checked by the same rules as ``server.<key>`` in the config file."""
    try:
        server = ServerConfig.model_validate({**config.server.model_dump(), key: value})
    except ValidationError as exc:
        messages = "; ".join(dict.fromkeys(error["msg"] for error in exc.errors()))
        raise UsageError(f"--{key} {value}: {messages}") from None
    return config.model_copy(update={"server": server})
