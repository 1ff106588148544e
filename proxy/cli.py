"""The ``lineage-proxy`` command line.

Exit codes: 0 success; 1 the input was checked and found invalid (``validate``);
2 bad usage or configuration (the message names file, line and key).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson

from proxy import __version__
from proxy.config import ConfigError, ProxyConfig, load_config
from proxy.logs import setup_logging

__all__ = ["main"]

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2

Command = Callable[[argparse.Namespace], int]


def _config(args: argparse.Namespace) -> ProxyConfig:
    config = load_config(args.config)
    setup_logging(config.logging.level, config.logging.json_format)
    return config


def _cmd_serve(args: argparse.Namespace) -> int:
    from proxy.serve import run_server

    config = _config(args)
    if args.port is not None:
        config = config.model_copy(
            update={"server": config.server.model_copy(update={"port": args.port})}
        )
    run_server(config)
    return EXIT_OK


def _cmd_validate(args: argparse.Namespace) -> int:
    from proxy.validation import EventValidator

    config = _config(args) if args.config else ProxyConfig()
    validator = EventValidator(
        strict=args.strict or config.validation.strict,
        extra_schema_dir=config.validation.extra_schema_dir,
    )
    bad = 0
    for name in args.files:
        try:
            document = orjson.loads(Path(name).read_bytes())
        except OSError as exc:
            print(f"{name}: cannot read: {exc.strerror}", file=sys.stderr)
            bad += 1
            continue
        except orjson.JSONDecodeError as exc:
            print(f"{name}: not valid JSON: {exc}", file=sys.stderr)
            bad += 1
            continue
        # A file may hold one event or a batch (JSON array), as the two endpoints take.
        events = document if isinstance(document, list) else [document]
        prefix = "/{}" if isinstance(document, list) else ""
        issues = [
            (prefix.format(i) + issue.pointer, issue.message)
            for i, event in enumerate(events)
            for issue in validator.validate(event)
        ]
        if issues:
            bad += 1
            for pointer, message in issues:
                print(f"{name}: {pointer or '/'}: {message}")
        else:
            print(f"{name}: valid ({len(events)} event{'s' if len(events) != 1 else ''})")
    return EXIT_INVALID if bad else EXIT_OK


def _cmd_consume(args: argparse.Namespace) -> int:
    import asyncio

    from consumers.run import consume_until_signalled, select_consumers

    config = _config(args)
    if args.all == bool(args.names):
        raise ConfigError("name the consumers to run, or give --all")
    names = select_consumers(config, [] if args.all else args.names)
    if config.kafka.bootstrap_servers == "embedded":
        raise ConfigError(
            "kafka.bootstrap_servers is 'embedded': that broker lives inside `serve`; "
            "run consumers there (server.run_consumers) or point kafka at a real cluster"
        )
    asyncio.run(consume_until_signalled(config, names))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lineage-proxy",
        description="Proxy and router for OpenLineage events, backed by Kafka.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the HTTP proxy")
    serve.add_argument("--config", type=Path, help="config file (default: built-in defaults)")
    serve.add_argument("--port", type=int, help="override server.port")
    serve.set_defaults(func=_cmd_serve)

    consume = commands.add_parser(
        "consume", help="run consumer daemons (Kafka → Marquez, Egeria, DataHub, HTTP, ...)"
    )
    consume.add_argument("names", nargs="*", metavar="NAME", help="consumer names (config.yaml)")
    consume.add_argument("--all", action="store_true", help="run every configured consumer")
    consume.add_argument("--config", type=Path, help="config file (default: built-in defaults)")
    consume.set_defaults(func=_cmd_consume)

    validate = commands.add_parser(
        "validate", help="validate OpenLineage event files offline (exit 1 if any is invalid)"
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="JSON file: an event or batch")
    validate.add_argument("--config", type=Path, help="config with validation settings")
    validate.add_argument("--strict", action="store_true", help="reject facets of unknown schema")
    validate.set_defaults(func=_cmd_validate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Command = args.func
    try:
        return func(args)
    except ConfigError as exc:
        print(f"configuration error:\n{exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
