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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
from pydantic import ValidationError

from proxy import __version__
from proxy.cli.spool import add_spool_commands
from proxy.config.settings import ConfigError, ProxyConfig, ServerConfig, load_config
from proxy.support.logs import setup_logging
from proxy.tap.client import add_tap_arguments, run_tap

if TYPE_CHECKING:
    from routing_rules.dry_run import DryRun
    from routing_rules.schema import RulesFile

__all__ = ["main"]

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2

Command = Callable[[argparse.Namespace], int]


def _config(args: argparse.Namespace) -> ProxyConfig:
    config = load_config(args.config)
    setup_logging(config.logging.level, config.logging.json_format)
    return config


def _with_running_embedded_broker(config: ProxyConfig) -> ProxyConfig:
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


def _with_server_option(config: ProxyConfig, key: str, value: str | int) -> ProxyConfig:
    """``--<key> value`` checked by the same rules as ``server.<key>`` in the config file."""
    try:
        server = ServerConfig.model_validate({**config.server.model_dump(), key: value})
    except ValidationError as exc:
        messages = "; ".join(dict.fromkeys(error["msg"] for error in exc.errors()))
        raise UsageError(f"--{key} {value}: {messages}") from None
    return config.model_copy(update={"server": server})


def _cmd_serve(args: argparse.Namespace) -> int:
    from proxy.server.embedded_broker import EmbeddedBrokerMissing, EmbeddedPortTaken
    from proxy.server.serve import CannotListen
    from proxy.server.workers import run_server

    config = _config(args)
    if args.port is not None:
        config = _with_server_option(config, "port", args.port)
    if args.workers is not None:
        workers = int(args.workers) if args.workers.isdigit() else args.workers
        config = _with_server_option(config, "workers", workers)
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

    config = _config(args) if args.config else ProxyConfig()
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

    config = _config(args)
    if args.all == bool(args.names):
        raise ConfigError("name the consumers to run, or give --all")
    names = select_consumers(config.consumers, [] if args.all else args.names)
    config = _with_running_embedded_broker(config)
    # On the loop server.event_loop names, as `serve` (uvloop unless set to asyncio).
    ok = run_on_event_loop(config, consume_until_signalled(config.consumers, config.kafka, names))
    return EXIT_OK if ok else EXIT_INVALID


def _rules_path(args: argparse.Namespace) -> Path:
    from routing_rules.loader import BUILTIN_RULES

    if args.file is not None:
        return Path(args.file)
    config = _config(args) if args.config else ProxyConfig()
    return config.routing.rules or BUILTIN_RULES


def _cmd_rules_check(args: argparse.Namespace) -> int:
    from routing_rules.loader import load_rules_file

    path = _rules_path(args)
    try:
        rules = load_rules_file(path)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_INVALID
    print(f"{path}: ok ({len(rules.rules)} rules, {len(rules.destinations)} destinations)")
    return EXIT_OK


def _cmd_config_check(args: argparse.Namespace) -> int:
    """Everything ``serve`` and ``consume`` check before they start, without starting:
    the config, the rules file it names, each consumer's target (credentials from the
    environment included)."""
    from proxy.destinations.http.target import HttpTarget
    from routing_rules.loader import BUILTIN_RULES, load_rules_file

    try:
        config = load_config(args.config)
        rules_path = config.routing.rules or BUILTIN_RULES
        rules = load_rules_file(rules_path)
        for name, consumer in config.consumers.items():
            target = consumer.target
            if isinstance(target, HttpTarget) and target.auth is not None:
                try:
                    target.auth.header()  # a credential's environment variable is set
                except ValueError as exc:
                    where = f"{args.config}: consumers.{name}.target.auth"
                    raise ConfigError(f"{where}: {exc}") from None
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_INVALID
    consumers = ", ".join(config.consumers) or "none"
    print(
        f"{args.config}: ok (rules {rules_path}: {len(rules.rules)} rules, "
        f"{len(rules.destinations)} destinations; consumers: {consumers})"
    )
    return EXIT_OK


def _cmd_rules_test(args: argparse.Namespace) -> int:
    from proxy.validation import EventValidator
    from proxy.validation.repairs import EventRepairer
    from routing_rules.dry_run import DryRun
    from routing_rules.loader import load_rules_file

    try:
        rules = load_rules_file(args.file)
    except ConfigError as exc:
        print(exc)
        return EXIT_INVALID
    if (args.cases is None) == (not args.events):
        raise UsageError("give EVENT.json files or --cases FILE (not both)")
    config = _config(args) if args.config else ProxyConfig()
    validator = EventValidator(
        strict=config.validation.is_strict, extra_schema_dir=config.validation.extra_schema_dir
    )
    repairer = EventRepairer(
        config.validation.enabled_repairs(), config.validation.naive_time_zones()
    )
    dry_run = DryRun(
        rules,
        validator,
        repairer,
        source=str(args.file),
        default_topic=config.kafka.topic,
        archive_root=config.routing.archive_root,
    )
    if args.cases is not None:
        return _run_rules_cases(dry_run, rules, args.cases)
    status = EXIT_OK
    for name in args.events:
        try:
            document = orjson.loads(Path(name).read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            print(f"{name}: cannot read an event: {exc}", file=sys.stderr)
            status = EXIT_INVALID
            continue
        for outcome in dry_run.outcomes(name, document):
            if outcome.invalid:
                status = EXIT_INVALID
            if args.json:
                print(orjson.dumps(outcome.as_json()).decode())
            else:
                print(outcome.as_text())
    return status


def _run_rules_cases(dry_run: DryRun, rules: RulesFile, path: Path) -> int:
    from routing_rules.cases import load_cases, run_cases

    try:
        cases = load_cases(path, rules)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    results = run_cases(dry_run, cases)
    for result in results:
        print(result.as_text())
    failed = sum(not result.passed for result in results)
    print(f"{path}: {len(results) - failed} passed, {failed} failed")
    return EXIT_INVALID if failed else EXIT_OK


def _add_rules_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rules = commands.add_parser("rules", help="check routing rules files and dry-run events")
    sub = rules.add_subparsers(dest="rules_command", required=True, metavar="COMMAND")
    check = sub.add_parser(
        "check", help="validate a rules file (exit 1 with file:line: reason if it is broken)"
    )
    check.add_argument(
        "file", nargs="?", metavar="FILE", help="rules file (default: routing.rules of --config)"
    )
    check.add_argument("--config", type=Path, help="config naming the rules file")
    check.set_defaults(func=_cmd_rules_check)
    test = sub.add_parser(
        "test",
        help="dry run: for each event, the rules that matched, transforms, destinations "
        "and the event as it would be sent",
    )
    test.add_argument("file", metavar="FILE", help="rules file")
    test.add_argument("events", nargs="*", metavar="EVENT.json", help="an event or a batch")
    test.add_argument(
        "--cases",
        type=Path,
        metavar="FILE",
        help="rules unit tests: YAML cases with expected destinations, fields, drops "
        "(exit 1 if one fails, 2 if the file is malformed)",
    )
    test.add_argument("--config", type=Path, help="config with validation settings")
    test.add_argument("--json", action="store_true", help="one JSON object per event")
    test.set_defaults(func=_cmd_rules_test)


def _cmd_replay(args: argparse.Namespace) -> int:
    import asyncio

    from consumers.replay import ReplayFilter, parse_time, replay
    from proxy.destinations.object_archive.destination import split_archive_url

    config = _config(args)
    if args.to_topic is not None:
        config = _with_running_embedded_broker(config)
    archive: Path | str = args.archive
    if split_archive_url(args.archive) is None:
        archive = Path(args.archive)
        if not archive.is_dir():
            raise ConfigError(f"--archive {args.archive}: not a directory")
    try:
        keep = ReplayFilter(
            since=parse_time(args.since) if args.since else None,
            until=parse_time(args.until) if args.until else None,
            namespace=args.namespace,
        )
    except ValueError as exc:
        raise ConfigError(f"--since/--until: {exc}") from None
    if args.create_topic and args.to_topic is None:
        raise UsageError("--create-topic goes with --to-topic")
    to = args.to_topic or args.to_consumer
    try:
        result = asyncio.run(
            replay(
                config.consumers,
                config.kafka,
                archive,
                to,
                keep,
                to_topic=args.to_topic is not None,
                create_topic=args.create_topic,
            )
        )
    except ConfigError as exc:  # the target named on the command line: one line
        raise UsageError(str(exc)) from None
    print(
        f"replayed {result.sent} events to {to}; {result.failed} not taken, "
        f"{result.unreadable} unreadable lines skipped",
        file=sys.stderr,
    )
    if result.in_progress_files:
        print(
            f"{result.in_progress_files} of the files read were still being written "
            "(_*.inprogress): their events up to the last whole line are included; "
            "lines written after this replay read them are not",
            file=sys.stderr,
        )
    return EXIT_INVALID if result.failed else EXIT_OK


def _cmd_dlq(args: argparse.Namespace) -> int:
    import asyncio

    from consumers.dlq_tools import (
        Selection,
        SelectionError,
        read_dead_letters,
        redrive,
        source_topic_of,
    )
    from consumers.replay import parse_time

    config = _with_running_embedded_broker(_config(args))
    topic = args.topic or f"{config.kafka.topic}.dlq"
    try:
        since = parse_time(args.since) if args.since else None
    except ValueError as exc:
        raise UsageError(f"--since {args.since}: {exc}") from None
    ids = tuple(args.ids) if args.dlq_command == "redrive" else ()
    if args.dlq_command == "show":
        ids = (args.id,)
    selection = Selection(ids, args.consumer, since, args.reason, args.limit)
    if args.dlq_command == "redrive" and args.max_attempts < 1:
        raise UsageError(f"--max-attempts {args.max_attempts}: must be 1 or more")
    if args.dlq_command == "redrive" and args.create_topic and args.to_consumer:
        raise UsageError("--create-topic goes with a topic, not --to-consumer")
    if args.dlq_command == "redrive" and not (ids or selection.filters or args.all):
        raise UsageError("say which records: IDs, --consumer/--since/--reason, or --all")
    try:
        chosen = selection.pick(read_dead_letters(config.kafka, topic))
        if args.dlq_command == "redrive" and chosen and not (args.to_consumer or args.to_topic):
            args.to_topic = source_topic_of(chosen)
    except (SelectionError, ConfigError) as exc:
        raise UsageError(str(exc)) from None
    if args.dlq_command == "show":
        print(orjson.dumps(chosen[0].as_json(), option=orjson.OPT_INDENT_2).decode())
        return EXIT_OK
    if args.dlq_command == "list":
        if not chosen:
            picked = "selected " if selection.filters else ""
            print(f"no {picked}dead letters in {topic}", file=sys.stderr)
        for record in chosen:
            print(
                orjson.dumps(record.summary()).decode()
                if args.format == "json"
                else record.as_text()
            )
        return EXIT_OK
    to = args.to_topic or args.to_consumer
    if not chosen:
        print(f"redrive: no record of {topic} is selected; nothing sent", file=sys.stderr)
        return EXIT_OK
    if args.dry_run:
        for record in chosen:
            print(f"would redrive {record.id} to {to}: {record.as_text().strip()}")
        return EXIT_OK
    try:
        result = asyncio.run(
            redrive(
                chosen,
                config.consumers,
                config.kafka,
                to,
                to_topic=args.to_topic is not None,
                max_attempts=args.max_attempts,
                create_topic=args.create_topic,
            )
        )
    except ConfigError as exc:  # the target named on the command line: one line
        raise UsageError(str(exc)) from None
    failed = result.failed + result.unreadable + result.untried
    print(f"redrive: {result.sent} of {len(chosen)} re-sent to {to}, {failed} not", file=sys.stderr)
    if result.untried:
        print(
            f"redrive: stopped: {to} stayed unreachable after {args.max_attempts} attempts; "
            f"{result.untried} records not tried — run it again once {to} is back",
            file=sys.stderr,
        )
    return EXIT_INVALID if failed else EXIT_OK


def _add_dlq_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dlq = commands.add_parser(
        "dlq",
        help="list, show and re-drive dead letters (the <topic>.dlq topics of the consumers)",
        description="Reads the dead-letter topic without joining a group; never deletes "
        "from it. Records are named PARTITION:OFFSET (a bare OFFSET if unambiguous).",
    )
    sub = dlq.add_subparsers(dest="dlq_command", required=True, metavar="COMMAND")
    parsers = {
        "list": sub.add_parser("list", help="dead letters with time, key, consumer, reason"),
        "show": sub.add_parser("show", help="one dead letter (event, headers, reason) as JSON"),
        "redrive": sub.add_parser(
            "redrive",
            help="re-send dead letters to their topic, another topic or a consumer's target",
            description="Prints `redriven ID` per record taken. Exit 0 when all were "
            "taken, 1 when some were not, 2 on bad usage.",
        ),
    }
    parsers["show"].add_argument("id", metavar="ID", help="PARTITION:OFFSET or OFFSET")
    parsers["redrive"].add_argument("ids", nargs="*", metavar="ID", help="records to re-send")
    for parser in parsers.values():
        parser.add_argument("--topic", help="the dead-letter topic (default: <kafka.topic>.dlq)")
        parser.add_argument("--config", type=Path, help="config with kafka and consumers")
        parser.add_argument("--consumer", help="only records this consumer dead-lettered")
        parser.add_argument("--since", help="only records dead-lettered since (RFC 3339/date)")
        parser.add_argument("--reason", help="only records whose reason contains this")
        parser.add_argument("--limit", type=int, help="at most this many (oldest first)")
        parser.set_defaults(func=_cmd_dlq)
    parsers["list"].add_argument("--format", choices=("text", "json"), default="text")
    redrive = parsers["redrive"]
    redrive.add_argument("--all", action="store_true", help="every record (no filter)")
    redrive.add_argument("--dry-run", action="store_true", help="say what would be sent")
    redrive.add_argument(
        "--max-attempts",
        type=int,
        default=5,
        metavar="N",
        help="tries per record to a consumer's target; when it stays unreachable the "
        "redrive stops and lists the records not tried (default: 5)",
    )
    to = redrive.add_mutually_exclusive_group()
    to.add_argument("--to-topic", metavar="TOPIC", help="default: the topic they came from")
    to.add_argument("--to-consumer", metavar="NAME", help="a configured consumer's target")
    redrive.add_argument(
        "--create-topic", action="store_true", help="create the target topic if it is missing"
    )


def _cmd_schema(args: argparse.Namespace) -> int:
    from proxy.config.reference import json_schema

    print(json_schema(args.document))
    return EXIT_OK


def _cmd_config_reference(args: argparse.Namespace) -> int:
    from proxy.config.reference import config_reference

    sys.stdout.write(config_reference())
    return EXIT_OK


def _cmd_completion(args: argparse.Namespace) -> int:
    from proxy.cli.completion import completion_script

    sys.stdout.write(completion_script(args.shell, build_parser()))
    return EXIT_OK


def _add_shell_and_editor_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    from proxy.cli.completion import SHELLS

    completion = commands.add_parser(
        "completion",
        help="print a shell completion script, e.g. source <(lineage-proxy completion bash)",
    )
    completion.add_argument("shell", choices=SHELLS)
    completion.set_defaults(func=_cmd_completion)
    schema = commands.add_parser(
        "schema",
        help="print the JSON Schema of config.yaml or of a rules file (for editors)",
    )
    schema.add_argument("document", choices=["config", "rules"])
    schema.set_defaults(func=_cmd_schema)
    reference = commands.add_parser(
        "config-reference",
        help="print the configuration reference (Markdown): every key, type, default",
    )
    reference.set_defaults(func=_cmd_config_reference)


def _cmd_spark(args: argparse.Namespace) -> int:
    # Imported here: the proxy itself runs without PySpark.
    from spark_emitter.archive_jobs import compact, graph
    from spark_emitter.archive_jobs.session import run_job

    job = {"compact": compact.run, "graph": graph.run}[args.spark_command]
    return run_job(job, f"lineage-proxy {args.spark_command}", args)


def _add_spark_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from spark_emitter.archive_jobs.session import add_job_arguments

    spark = commands.add_parser("spark", help="Spark jobs over the archive (needs the spark extra)")
    sub = spark.add_subparsers(dest="spark_command", required=True, metavar="COMMAND")
    compact = sub.add_parser(
        "compact",
        help="archive (JSON Lines) → Parquet partitioned by dt and namespace; idempotent",
    )
    add_job_arguments(compact)
    compact.set_defaults(func=_cmd_spark)
    graph = sub.add_parser(
        "graph",
        help="runs, dataset edges, column-lineage edges and merged facets of the archive, "
        "as Parquet tables; prints a summary",
    )
    add_job_arguments(graph)
    graph.set_defaults(func=_cmd_spark)


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
    replay.set_defaults(func=_cmd_replay)

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
    _add_rules_commands(commands)
    config_commands = commands.add_parser("config", help="check a config file without starting")
    config_sub = config_commands.add_subparsers(
        dest="config_command", required=True, metavar="COMMAND"
    )
    check = config_sub.add_parser(
        "check",
        help="validate config.yaml, its rules file and its consumers' targets "
        "(exit 1 with file:line: reason if broken)",
    )
    check.add_argument("--config", type=Path, required=True, help="config file to check")
    check.set_defaults(func=_cmd_config_check)
    _add_dlq_commands(commands)
    add_spool_commands(commands)
    _add_shell_and_editor_commands(commands)
    _add_spark_commands(commands)
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
