"""``python -m proxy.server.prestop``: a proxy pod's preStop hook — wait until its spool is empty.

On a scale-in or a node drain the pod goes and its volume stays behind: events still in
the spool would wait there until a pod with that volume came back, which after a
scale-in may be never. So before the proxy gets SIGTERM, the Helm chart runs this, which
waits (at most ``--timeout`` seconds) until no spool segment is left under
``kafka.spool.directory`` — the drainer deletes a segment once Kafka confirmed every
record in it, so no segment means Kafka has every acknowledged event. The proxy keeps
serving and draining meanwhile; a terminating pod is out of the Service already.

Exit 0 once the spool is empty; 1 when time ran out, 2 on a config error. When time ran
out, Kubernetes records the hook's failure and its output as a ``FailedPreStopHook``
event on the pod — which expires in about an hour — so the hook also writes
``stranded.json`` beside the events (:mod:`proxy.destinations.kafka.stranded`): a record that stays
on the volume and that the next proxy on it reports.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from proxy.config.settings import ConfigError, load_config
from proxy.destinations.kafka.stranded import RECORD, spooled_under, write_record

__all__ = ["main", "spool_directories", "wait_until_drained"]

_POLL_SECONDS = 1.0


# Directories under a root (itself included) that still hold spool segments.
spool_directories = spooled_under


def wait_until_drained(
    root: Path,
    timeout: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
) -> list[Path]:
    """Wait until nothing is spooled under ``root`` or ``timeout`` seconds passed; return
    the directories still holding segments (empty: drained)."""
    deadline = clock() + timeout
    while (left := spool_directories(root)) and clock() < deadline:
        pause(min(_POLL_SECONDS, max(0.0, deadline - clock())))
    return left


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m proxy.server.prestop",
        description="Wait until Kafka has taken every spooled event (a pod's preStop hook).",
    )
    parser.add_argument("--config", type=Path, help="the proxy's config file")
    parser.add_argument("--timeout", type=float, required=True, help="seconds to wait at most")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, environ=os.environ)
    except ConfigError as exc:
        print(f"configuration error:\n{exc}", file=sys.stderr)
        return 2
    root = config.kafka.spool.directory
    if spooled := spool_directories(root):
        print(
            f"waiting up to {args.timeout:g} s for Kafka to take the events spooled in"
            f" {', '.join(map(str, spooled))}",
            flush=True,
        )
    left = wait_until_drained(root, args.timeout)
    if not left:
        print(f"spool {root} is empty: Kafka has every acknowledged event")
        return 0
    try:
        stranded = write_record(root, left)
        recorded = f"{stranded.events} events, recorded in {root / RECORD}"
    except OSError as exc:  # the volume itself failing: say so, the events stay regardless
        recorded = f"no record written ({exc.strerror or exc})"
    print(
        f"after {args.timeout:g} s the spool still holds events in {', '.join(map(str, left))}"
        f" ({recorded}): Kafka did not take them. They stay on this pod's volume: scale back"
        " up so that a pod with it starts again, or run `lineage-proxy spool drain` in a pod"
        " that mounts it (docs/operate/runbooks.md#lineageproxyspoolstranded)",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
