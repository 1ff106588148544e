"""``lineage-proxy spool list|drain|dead-letters``: see what the local Kafka spools hold,
and forward it.

A running proxy drains its own spool, and at start every spool left under its
``kafka.spool.directory`` (:mod:`proxy.destinations.kafka.spool_dirs`). These commands are for
what it cannot decide alone: a spool written for a cluster the configuration no longer
names (the proxy logs it at start and leaves it), or a spool copied from another host.
``drain`` takes a spool directory over (the lock a running proxy holds), sends every
record to Kafka with its topic, key and headers, in spool order, and deletes each segment
once Kafka confirmed all of it — as the proxy's own drainer does, with the same code.
``dead-letters`` shows the records Kafka refused for good, which the drain set aside in
each spool's ``dead-letters.spool``: why, and (``--format json``) the events themselves,
to fix and send again.

Exit codes: 0 done (``drain``: every selected spool is empty); 1 something is left
(a spool in use by a running proxy, one for an unknown cluster, Kafka not confirming
before ``--timeout``); 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from proxy.config.settings import ProxyConfig, load_config
from proxy.support.logs import setup_logging

if TYPE_CHECKING:
    from proxy.destinations.kafka.spool_dirs import SpoolContents
    from proxy.kafka.settings import KafkaConfig

__all__ = ["add_spool_commands"]

EXIT_OK, EXIT_LEFT, EXIT_USAGE = 0, 1, 2

_EPILOG = """examples:
  lineage-proxy spool list --config config.yaml
  lineage-proxy spool drain --config config.yaml
  lineage-proxy spool drain var/spool/10.0.0.5_9092 --bootstrap-servers kafka-a:9092
  lineage-proxy spool dead-letters --format json --config config.yaml
"""


def add_spool_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    spool = commands.add_parser(
        "spool",
        help="list the local Kafka spools and forward what they hold",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = spool.add_subparsers(dest="spool_command", required=True, metavar="COMMAND")
    listing = sub.add_parser(
        "list",
        help="every spool directory under kafka.spool.directory: events, bytes, oldest, "
        "cluster, and whether a running proxy holds it",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    listing.add_argument("--format", choices=("text", "json"), default="text")
    drain = sub.add_parser(
        "drain",
        help="forward spooled events to Kafka and delete them once confirmed",
        description="Without DIRECTORY: every spool under kafka.spool.directory that no "
        "running proxy holds, each to the cluster it was written for.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    drain.add_argument("directories", nargs="*", type=Path, metavar="DIRECTORY")
    drain.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT[,...]",
        help="send to this cluster (default: the one each spool was written for)",
    )
    drain.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for Kafka (default 120)"
    )
    dead = sub.add_parser(
        "dead-letters",
        help="the spooled records Kafka refused for good: spool, topic, key, size, why",
        description="Records Kafka will never take (too large for the topic, invalid) are "
        "set aside by the drain so it goes on. --format json prints each with its event, "
        "one per line, to fix and POST again.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dead.add_argument("--format", choices=("text", "json"), default="text")
    for parser in (listing, drain, dead):
        parser.add_argument("--config", type=Path, help="config file (kafka settings)")
        parser.set_defaults(func=_cmd_spool)


def _cmd_spool(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    setup_logging(config.logging.level, config.logging.json_format)
    if args.spool_command == "list":
        return _list(config, args.format)
    if args.spool_command == "dead-letters":
        return _dead_letters(config, args.format)
    return asyncio.run(_drain(config, args.directories, args.bootstrap_servers, args.timeout))


def _every_spool(config: ProxyConfig) -> list[Path]:
    from proxy.destinations.kafka.spool_dirs import spool_directories
    from proxy.destinations.kafka.spool_drainer import spool_roots

    roots = spool_roots(config.kafka.spool.directory)
    return spool_directories((roots.own, *roots.orphans))


def _in_use(directory: Path) -> bool:
    """Whether a live process holds ``directory`` (its lock is taken)."""
    import fcntl

    from proxy.destinations.kafka.spool import _LOCK_NAME

    try:
        handle = (directory / _LOCK_NAME).open("rb")
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def _state(contents: SpoolContents, configured: str) -> str:
    from proxy.destinations.kafka.spool_dirs import cluster_for

    if _in_use(contents.directory):
        return "in use by a running proxy (it drains it)"
    target = cluster_for(contents.directory, configured, ())
    if target is None:
        return (
            f"for Kafka at {contents.cluster}, which the configuration does not name: "
            f"lineage-proxy spool drain {contents.directory} --bootstrap-servers HOST:PORT"
        )
    return f"left over: the next proxy start (or `spool drain`) sends it to {target}"


def _iso(wall: float | None) -> str | None:
    from proxy.openlineage.times import utc_timestamp

    return None if wall is None else utc_timestamp(wall)


def _list(config: ProxyConfig, output: str) -> int:
    from proxy.destinations.kafka.spool_dirs import spool_contents

    configured = config.kafka.bootstrap_servers
    found = [spool_contents(directory) for directory in _every_spool(config)]
    for contents in found:
        entry = {
            "directory": str(contents.directory),
            "events": contents.events,
            "bytes": contents.bytes,
            "oldest": _iso(contents.oldest),
            "cluster": contents.cluster,
            "state": _state(contents, configured),
        }
        if output == "json":
            print(orjson.dumps(entry).decode())
        else:
            print(
                f"{entry['directory']}: {entry['events']} events, {entry['bytes']} bytes, "
                f"oldest {entry['oldest'] or '-'}, cluster {entry['cluster'] or 'unrecorded'}"
                f" — {entry['state']}"
            )
    if not found and output == "text":
        print(f"no spooled events under {config.kafka.spool.directory}", file=sys.stderr)
    _say_stranded(config.kafka.spool.directory, output)
    return EXIT_OK


def _say_stranded(root: Path, output: str) -> None:
    """The record a preStop drain that gave up left under ``root``
    (proxy/destinations/kafka/stranded.py),
    while the spool still holds events (text output only: JSON lines list spools)."""
    from proxy.destinations.kafka.stranded import RECORD, read_record, spooled_under

    stranded = read_record(root)
    if output != "text" or stranded is None or not spooled_under(root):
        return
    print(
        f"{root / RECORD}: pod {stranded.pod}'s preStop drain gave up at {_iso(stranded.at)}"
        f" leaving {stranded.events} events here; the record goes once the spool is drained"
    )


async def _drain(
    config: ProxyConfig, directories: list[Path], servers: str | None, wait_seconds: float
) -> int:
    from proxy.destinations.kafka.spool import SpoolLocked
    from proxy.destinations.kafka.spool_dirs import cluster_for, spool_contents

    configured = config.kafka.bootstrap_servers
    chosen = directories or [d for d in _every_spool(config) if not _in_use(d)]
    left = 0
    for directory in chosen:
        if not directory.is_dir():
            print(f"spool drain: {directory}: not a directory", file=sys.stderr)
            return EXIT_USAGE
        target = servers or cluster_for(directory, configured, ())
        if target is None or target == "embedded":
            contents = spool_contents(directory)
            print(
                f"spool drain: {directory} holds {contents.events} events for Kafka at "
                f"{contents.cluster or configured}; say where with --bootstrap-servers",
                file=sys.stderr,
            )
            left += contents.events
            continue
        try:
            left += await _drain_one(directory, config.kafka, target, wait_seconds)
        except SpoolLocked:
            print(f"spool drain: {directory} is in use by a running proxy", file=sys.stderr)
            left += 1
    if not chosen:
        print(f"spool drain: no spool to drain under {config.kafka.spool.directory}")
    if not left:
        from proxy.destinations.kafka.stranded import clear_if_drained

        clear_if_drained(config.kafka.spool.directory)
    return EXIT_LEFT if left else EXIT_OK


async def _drain_one(directory: Path, kafka: KafkaConfig, servers: str, wait_seconds: float) -> int:
    """Forward ``directory``'s records to ``servers``; return how many are left."""
    from proxy.destinations.kafka.spool import Spool
    from proxy.destinations.kafka.spool_drainer import KafkaSpool
    from proxy.kafka.client_logs import failure_reason
    from proxy.kafka.producer import KafkaProducer
    from proxy.kafka.settings import producer_settings

    producer = KafkaProducer(producer_settings(servers, kafka.producer))
    producer.start()

    async def create_topic(topic: str) -> None:
        if kafka.create_topics:
            # -1: the cluster's default replication (as the proxy creates its topics).
            wanted = {topic: (kafka.topic_partitions, kafka.topic_replication_factor or -1)}
            try:
                await asyncio.to_thread(producer.ensure_topics, wanted, 5.0)
            except Exception as exc:  # the send below reports what matters
                reason = failure_reason(exc)
                print(f"spool drain: could not ensure topic {topic}: {reason}", file=sys.stderr)

    spool = KafkaSpool(
        Spool(directory, kafka.spool.max_bytes, kafka.spool.segment_bytes),
        producer,
        before_send=create_topic,
    )
    try:
        await spool.start()
        total = spool.spool.events
        deadline = time.monotonic() + wait_seconds
        # The drainer signals nothing when it confirms: a command line tool may poll.
        while spool.spool.events and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.2)
        left = spool.spool.events
        await spool.close()
    finally:
        await asyncio.to_thread(producer.flush, 5.0)
        producer.stop()
    print(f"spool drain: {directory}: {total - left} of {total} events sent to Kafka at {servers}")
    if left:
        print(
            f"spool drain: {left} events stay in {directory}: Kafka at {servers} did not "
            f"confirm them within {wait_seconds:.0f} s",
            file=sys.stderr,
        )
    return left


def _dead_letters(config: ProxyConfig, output: str) -> int:
    from proxy.destinations.kafka.spool import REFUSED_HEADER, read_dead_letters
    from proxy.destinations.kafka.spool_dirs import dead_letter_files
    from proxy.destinations.kafka.spool_drainer import spool_roots

    roots = spool_roots(config.kafka.spool.directory)
    count = 0
    for path in dead_letter_files((roots.own, *roots.orphans)):
        for record in read_dead_letters(path):
            count += 1
            reason = dict(record.headers).get(REFUSED_HEADER, b"").decode("utf-8", "replace")
            entry = {
                "spool": str(path.parent),
                "topic": record.topic,
                "key": record.key,
                "bytes": len(record.value),
                "reason": reason,
                "spooled_at": _iso(record.spooled_at),
            }
            if output == "json":
                try:
                    shown = {"event": orjson.loads(record.value)}
                except orjson.JSONDecodeError:  # a record no proxy wrote: shown as text
                    shown = {"value": record.value.decode("utf-8", "replace")}
                print(orjson.dumps({**entry, **shown}).decode())
            else:
                print(
                    f"{entry['spool']}: {entry['topic']} key {entry['key']}, "
                    f"{entry['bytes']} bytes, spooled {entry['spooled_at']} — {reason}"
                )
    if count == 0 and output == "text":
        print(f"no dead letters under {config.kafka.spool.directory}", file=sys.stderr)
    return EXIT_OK
