"""The ``lineage-proxy`` command line.

Exit codes: 0 success; 1 the input was checked and found invalid (``validate``,
``rules check``, ``rules test``); 2 bad usage or configuration (the message names file,
line and key).
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from proxy import __version__
from proxy.cli.checks import add_config_commands, add_rules_commands
from proxy.cli.common import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    Command,
    UsageError,
    config_from,
    with_running_embedded_broker,
    with_server_option,
)
from proxy.cli.completion import SHELLS
from proxy.cli.dlq import add_dlq_commands
from proxy.cli.editor import add_editor_commands
from proxy.cli.replay import cmd_replay
from proxy.cli.spark import add_spark_commands
from proxy.cli.spool import add_spool_commands
from proxy.config.settings import ConfigError, ProxyConfig
from proxy.tap.client import add_tap_arguments, run_tap

if TYPE_CHECKING:
    pass

__all__ = ["main"]


def _cmd_serve(args: argparse.Namespace) -> int:
    from proxy.server.embedded_broker import EmbeddedBrokerMissing, EmbeddedPortTaken
    from proxy.server.serve import CannotListen
    from proxy.server.workers import run_server

    config = config_from(args)
    if args.port is not None:
        config = with_server_option(config, "port", args.port)
    if args.workers is not None:
        workers = int(args.workers) if args.workers.isdigit() else args.workers
        config = with_server_option(config, "workers", workers)
    try:
        return run_server(config)
    except (CannotListen, EmbeddedBrokerMissing, EmbeddedPortTaken) as exc:
        raise UsageError(str(exc)) from None


def _cmd_hash_token(args: argparse.Namespace) -> int:
    import getpass

    from proxy.auth.config import token_digest

    # From a terminal without echo; stripped as the proxy strips the Authorization header's.
    token = (getpass.getpass("token: ") if sys.stdin.isatty() else sys.stdin.read()).strip()
    if not token:
        raise UsageError("no token on stdin")
    print(token_digest(token).hex())
    return EXIT_OK


def _cmd_validate(args: argparse.Namespace) -> int:
    from proxy.openlineage.repaired import RepairedEvent
    from proxy.validation import EventValidator
    from proxy.validation.repairs import EventRepairer, validate_or_repair

    config = config_from(args) if args.config else ProxyConfig()
    strict = args.strict or config.validation.is_strict
    validator = EventValidator(strict=strict, extra_schema_dir=config.validation.extra_schema_dir)
    # What the proxy would repair and accept is not called invalid: it is said as repaired.
    repairer = EventRepairer(
        () if strict else config.validation.enabled_repairs(),
        config.validation.naive_time_zones(),
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
        issues: list[tuple[str, str]] = []
        repairs: list[str] = []
        for i, event in enumerate(events):
            accepted, found = validate_or_repair(validator, repairer, event)
            issues += [(prefix.format(i) + issue.pointer, issue.message) for issue in found]
            if isinstance(accepted, RepairedEvent):
                repairs += [
                    f"{prefix.format(i) + r.pointer}: {r.name}: {r.before!r} → {r.after!r}"
                    for r in accepted.repairs
                ]
        if issues:
            bad += 1
            for pointer, message in issues:
                print(f"{name}: {pointer or '/'}: {message}")
        elif repairs:
            for repair in repairs:
                print(f"{name}: {repair}")
            print(f"{name}: valid after repairs, as the proxy would accept it")
        else:
            print(f"{name}: valid ({len(events)} event{'s' if len(events) != 1 else ''})")
    return EXIT_INVALID if bad else EXIT_OK


def _cmd_consume(args: argparse.Namespace) -> int:
    from consumers.run import consume_until_signalled, select_consumers
    from proxy.server.serve import run_on_event_loop

    config = config_from(args)
    if args.all == bool(args.names):
        raise ConfigError("name the consumers to run, or give --all")
    names = select_consumers(config.consumers, [] if args.all else args.names)
    config = with_running_embedded_broker(config)
    # On the loop server.event_loop names, as `serve` (uvloop unless set to asyncio).
    ok = run_on_event_loop(config, consume_until_signalled(config.consumers, config.kafka, names))
    return EXIT_OK if ok else EXIT_INVALID


def _cmd_completion(args: argparse.Namespace) -> int:
    from proxy.cli.completion import completion_script

    sys.stdout.write(completion_script(args.shell, build_parser()))
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
    serve.add_argument(
        "--workers",
        metavar="N|auto",
        help="override server.workers: processes serving the port together (auto: one per core)",
    )
    serve.set_defaults(func=_cmd_serve)

    consume = commands.add_parser(
        "consume",
        help="run consumer daemons (Kafka → Marquez, Egeria, DataHub, HTTP, ...)",
        description="Runs until SIGTERM/SIGINT, then finishes in-flight deliveries, commits "
        "and leaves the group (exit 0). Exit 1 if a daemon failed, 2 on a config error.",
    )
    consume.add_argument("names", nargs="*", metavar="NAME", help="consumer names (config.yaml)")
    consume.add_argument("--all", action="store_true", help="run every configured consumer")
    consume.add_argument("--config", type=Path, help="config file (default: built-in defaults)")
    consume.set_defaults(func=_cmd_consume)

    replay = commands.add_parser(
        "replay",
        help="re-send archived events in event-time order to a consumer's target or a topic",
        description="Exit 0 when every kept event was taken, 1 when a target refused some.",
    )
    replay.add_argument(
        "--archive",
        required=True,
        help="archive directory, or s3://bucket/prefix (s3a:// too) for an object_archive",
    )
    to = replay.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-consumer", metavar="NAME", help="a configured consumer's target")
    to.add_argument("--to-topic", metavar="TOPIC", help="a topic of the kafka cluster")
    replay.add_argument(
        "--create-topic", action="store_true", help="create the --to-topic topic if missing"
    )
    replay.add_argument("--since", help="RFC 3339 time or date, inclusive (event time)")
    replay.add_argument("--until", help="RFC 3339 time or date, exclusive (event time)")
    replay.add_argument("--namespace", help="only events of this job (or dataset) namespace")
    replay.add_argument("--config", type=Path, help="config with consumers and kafka settings")
    replay.set_defaults(func=cmd_replay)

    validate = commands.add_parser(
        "validate", help="validate OpenLineage event files offline (exit 1 if any is invalid)"
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="JSON file: an event or batch")
    validate.add_argument("--config", type=Path, help="config with validation settings")
    validate.add_argument("--strict", action="store_true", help="reject facets of unknown schema")
    validate.set_defaults(func=_cmd_validate)
    hash_token = commands.add_parser(
        "hash-token",
        help="print the SHA-256 of the token read from stdin (for auth.tokens[].token_sha256)",
    )
    hash_token.set_defaults(func=_cmd_hash_token)
    add_rules_commands(commands)
    add_config_commands(commands)
    add_dlq_commands(commands)
    add_spool_commands(commands)
    completion = commands.add_parser(
        "completion",
        help="print a shell completion script, e.g. source <(lineage-proxy completion bash)",
    )
    completion.add_argument("shell", choices=SHELLS)
    completion.set_defaults(func=_cmd_completion)
    add_editor_commands(commands)
    add_spark_commands(commands)
    tap = commands.add_parser(
        "tap",
        help="watch accepted events as they pass through a running proxy",
        description="Prints one line per event the proxy accepted, with the rules that "
        "matched and the destinations it went to. Exit 0 at --limit or Ctrl-C, 1 when the "
        "proxy cannot be reached or refuses, 2 on a usage error.",
    )
    add_tap_arguments(tap)
    tap.set_defaults(func=run_tap)
    _describe(parser, ())
    return parser


# What each command is for (where its help line is too short) and one example of it, shown
# by its --help; a test holds every command to having both.
_ABOUT: dict[tuple[str, ...], tuple[str | None, str]] = {
    (): (None, "lineage-proxy serve --config config.yaml"),
    ("serve",): (
        "Runs the HTTP proxy: validates, authorizes and routes OpenLineage events, and "
        "answers 2xx once every durable destination has them. With the embedded broker it "
        "also starts it, and it runs the consumers of server.run_consumers in-process.",
        "lineage-proxy serve --config config.yaml --workers auto",
    ),
    ("consume",): (None, "lineage-proxy consume marquez --config config.yaml"),
    ("replay",): (
        None,
        "lineage-proxy replay --archive var/archive/events --to-consumer marquez "
        "--config config.yaml --since 2026-11-01",
    ),
    ("validate",): (
        "Checks event files as the proxy would (repairs included), without a proxy. Prints "
        "file: /pointer: message per problem.",
        "lineage-proxy validate events/*.json --config config.yaml",
    ),
    ("hash-token",): (
        "Reads a token from stdin and prints its SHA-256, to put in config.yaml as "
        "auth.tokens[].token_sha256 so the file holds no secret.",
        'printf %s "$TEAM_A_TOKEN" | lineage-proxy hash-token',
    ),
    ("rules",): (
        "Checks rules files, dry-runs events through them and runs rules unit tests.",
        "lineage-proxy rules check routing_rules/examples/per-team-topics.yaml",
    ),
    ("rules", "check"): (None, "lineage-proxy rules check --config config.yaml"),
    ("config",): (None, "lineage-proxy config check --config config.yaml"),
    ("config", "check"): (
        "Loads config.yaml and the rules file it names as serve would, and checks each "
        "consumer's target, without opening a port or reaching Kafka.",
        "lineage-proxy config check --config config.yaml",
    ),
    ("rules", "test"): (
        None,
        "lineage-proxy rules test routing_rules/examples/per-team-topics.yaml "
        "--cases routing_rules/examples/per-team-topics.cases.yaml",
    ),
    ("dlq",): (None, "lineage-proxy dlq list --config config.yaml"),
    ("dlq", "list"): (
        "Lists dead letters, oldest first: id, time, consumer, event, key, reason.",
        "lineage-proxy dlq list --consumer marquez --since 2026-11-23 --format json",
    ),
    ("dlq", "show"): (
        "Prints one dead letter as JSON: the event, its headers and why it was dead-lettered.",
        "lineage-proxy dlq show 2:41 --config config.yaml",
    ),
    ("dlq", "redrive"): (
        None,
        "lineage-proxy dlq redrive 2:41 2:57 --to-consumer marquez --dry-run",
    ),
    ("completion",): (
        "Prints a completion script for bash, zsh or fish, generated from this parser.",
        "source <(lineage-proxy completion bash)",
    ),
    ("schema",): (
        "Prints the JSON Schema of config.yaml or of a rules file, for editors with the "
        "YAML language server.",
        "lineage-proxy schema config > schemas/config.schema.json",
    ),
    ("config-reference",): (
        "Prints the configuration reference as Markdown: every key of config.yaml and of a "
        "rules file, with its type, default and description.",
        "lineage-proxy config-reference > docs/reference/configuration.md",
    ),
    ("spark",): (
        "Spark jobs over the archive: compaction to Parquet and the lineage graph tables.",
        "lineage-proxy spark compact --archive var/archive/events --out warehouse/events",
    ),
    ("spark", "compact"): (
        "Reads the archive's JSON Lines and appends the events not compacted yet to a "
        "Parquet table partitioned by dt and namespace.",
        "lineage-proxy spark compact --archive var/archive/events --out warehouse/events",
    ),
    ("spark", "graph"): (
        "Builds the runs, dataset_edges, column_edges and facets tables from the archive.",
        "lineage-proxy spark graph --archive var/archive/events --out warehouse/graph",
    ),
    ("tap",): (None, "lineage-proxy tap --url http://127.0.0.1:5000 --namespace 'team-a*'"),
}


def _describe(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
    description, example = _ABOUT.get(path, (None, ""))
    if description and not parser.description:
        parser.description = description
    if parser.description is None:  # the help line of the parent says it best
        parser.description = _HELP_LINES.get(path)
    if example:
        # Raw, so the example keeps its line; the description is wrapped here instead.
        parser.epilog = f"example:\n  {example}"
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        if parser.description:
            parser.description = textwrap.fill(parser.description, 88)
    for action in parser._actions:  # argparse keeps its sub-parsers only here
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                _HELP_LINES[(*path, choice.dest)] = _sentence(choice.help)
            for name, sub in action.choices.items():
                _describe(sub, (*path, name))


_HELP_LINES: dict[tuple[str, ...], str | None] = {}


def _sentence(help_line: str | None) -> str | None:
    return None if not help_line else help_line[0].upper() + help_line[1:] + "."


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Command = args.func
    try:
        code = func(args)
        sys.stdout.flush()  # inside the try: a reader gone shows here, not at exit
        return code
    except BrokenPipeError:
        # The reader left (`... | head`): what it did not read is not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except ConfigError as exc:
        print(f"configuration error:\n{exc}", file=sys.stderr)
        return EXIT_USAGE
    except UsageError as exc:
        print(f"lineage-proxy {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
