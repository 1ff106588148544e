"""``lineage-proxy replay``: re-send archived events in event-time order."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from proxy.cli.common import (
    EXIT_INVALID,
    EXIT_OK,
    UsageError,
    config_from,
    with_running_embedded_broker,
)
from proxy.config.settings import ConfigError


def cmd_replay(args: argparse.Namespace) -> int:
    import asyncio

    from consumers.replay import ReplayFilter, parse_time, replay
    from proxy.destinations.object_archive.destination import split_archive_url

    config = config_from(args)
    if args.to_topic is not None:
        config = with_running_embedded_broker(config)
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
