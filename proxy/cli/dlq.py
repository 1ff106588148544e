"""``lineage-proxy dlq list|show|redrive``: the consumers' dead letters."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from proxy.cli.common import (
    EXIT_INVALID,
    EXIT_OK,
    UsageError,
    config_from,
    with_running_embedded_broker,
)
from proxy.config.settings import ConfigError


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

    config = with_running_embedded_broker(config_from(args))
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


def add_dlq_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
