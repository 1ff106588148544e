"""``lineage-proxy tap``: print the proxy's accepted events as they pass, one line each.

Reads ``GET /api/v1/tap`` (Server-Sent Events, :mod:`proxy.web.tap_endpoint`). Exit codes:
0 when ``--limit`` events were printed, on Ctrl-C, or when stdout's reader left
(``tap | head``); 1 when the proxy cannot be reached, refuses the request (a missing or
wrong token) or ends the stream; 2 on a usage error. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO
from urllib.parse import urlsplit

import orjson

__all__ = ["add_tap_arguments", "format_text", "run_tap", "tap_events"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
_PROG = "lineage-proxy tap"


class TapFailed(Exception):
    """The proxy could not be reached, refused, or ended the stream (exit 1)."""


def add_tap_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", default="http://127.0.0.1:5000", help="the proxy (default: %(default)s)"
    )
    token = parser.add_mutually_exclusive_group()
    token.add_argument("--token", help="Bearer token (when the proxy's auth is on)")
    token.add_argument("--token-env", metavar="VAR", help="environment variable holding it")
    parser.add_argument("--rule", help="only events this rule matched ('(default)': default route)")
    parser.add_argument("--namespace", help="only this job (or dataset) namespace; a glob")
    parser.add_argument("--job", help="only jobs (or datasets) of this name; a glob")
    parser.add_argument("--event-type", help="only this eventType (START, COMPLETE, ...)")
    parser.add_argument(
        "--format",
        choices=["json", "text"],
        default="text",
        help="json: the proxy's record per line; text: a short summary (default)",
    )
    parser.add_argument("--limit", type=int, help="exit after this many events")


def format_text(record: dict[str, Any]) -> str:
    """One readable line: time, type, job, run, rules → destinations."""
    event = record.get("event") or {}
    subject = event.get("job") or event.get("dataset") or {}
    run_id = (event.get("run") or {}).get("runId")
    where = ", ".join(record.get("destinations") or []) or f"dropped by {record.get('dropped_by')}"
    parts = [
        record.get("time", "?"),
        f"{event.get('eventType') or '-':<8}",
        f"{subject.get('namespace', '?')}/{subject.get('name', '?')}",
    ]
    if run_id:
        parts.append(f"run={run_id}")
    parts.append(f"rules={','.join(record.get('rules') or []) or '-'}")
    parts.append(f"-> {where}")
    return " ".join(parts)


def _query(args: argparse.Namespace) -> dict[str, str]:
    wanted = {
        "rule": args.rule,
        "namespace": args.namespace,
        "job": args.job,
        "eventType": args.event_type,
    }
    return {key: value for key, value in wanted.items() if value}


async def tap_events(
    url: str,
    query: dict[str, str],
    token: str | None,
    on_event: Callable[[dict[str, Any]], bool],
    on_note: Callable[[str], None],
) -> None:
    """Stream events to ``on_event`` until it returns False; ``on_note`` gets the
    stream's status lines (connected, events dropped). Raises :class:`TapFailed`."""
    import aiohttp

    headers = {"Accept": "text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    timeout = aiohttp.ClientTimeout(total=None, connect=10, sock_connect=10, sock_read=None)
    endpoint = url.rstrip("/") + "/api/v1/tap"
    streaming = False
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(endpoint, params=query, headers=headers) as response,
        ):
            if response.status != 200:
                raise TapFailed(f"{endpoint}: {response.status} {await _error_of(response)}")
            streaming = True
            kind, data = "message", b""
            async for raw in response.content:
                line = raw.rstrip(b"\r\n")
                if line.startswith(b": tap open"):
                    on_note(f"watching {url} {' '.join(f'{k}={v}' for k, v in query.items())}")
                elif line.startswith(b"event:"):
                    kind = line[6:].strip().decode()
                elif line.startswith(b"data:"):
                    data += line[5:].strip()
                elif not line and data:
                    record, record_kind = orjson.loads(data), kind
                    kind, data = "message", b""
                    if record_kind == "dropped":
                        on_note(
                            f"{record['dropped']} events dropped so far (this reader was too slow)"
                        )
                    elif not on_event(record):
                        return
    except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
        if streaming:
            # The proxy cuts off a reader that stopped reading while its queues are full
            # (a paused pager), or it went away: either way the stream broke off.
            raise TapFailed(
                "the stream broke off (the proxy cuts off a reader that stops reading"
                " while its queues are full)"
            ) from None
        raise TapFailed(f"cannot reach the proxy at {url}: {exc}") from None
    raise TapFailed("the proxy ended the stream")


async def _error_of(response: Any) -> str:
    try:
        return str((await response.json(content_type=None)).get("error", ""))
    except ValueError:
        text: str = await response.text()
        return text[:200]


def _token(args: argparse.Namespace) -> str | None:
    if args.token_env is None:
        return args.token  # type: ignore[no-any-return]
    value = os.environ.get(args.token_env)
    if not value:
        raise ValueError(f"--token-env {args.token_env}: the variable is not set")
    return value


def run_tap(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """The ``tap`` command; prints events to ``out`` (stdout) and notes to stderr."""
    out = out or sys.stdout
    try:
        if args.limit is not None and args.limit < 1:
            raise ValueError(f"--limit {args.limit}: must be at least 1")
        parts = urlsplit(args.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"--url {args.url!r}: give http://host:port")
        token = _token(args)
    except ValueError as exc:
        print(f"{_PROG}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    printed = 0

    def on_event(record: dict[str, Any]) -> bool:
        nonlocal printed
        line = orjson.dumps(record).decode() if args.format == "json" else format_text(record)
        print(line, file=out, flush=True)
        printed += 1
        return args.limit is None or printed < args.limit

    def on_note(note: str) -> None:
        print(f"{_PROG}: {note}", file=sys.stderr, flush=True)

    try:
        asyncio.run(tap_events(args.url, _query(args), token, on_event, on_note))
    except TapFailed as exc:
        print(f"{_PROG}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:
        # The reader left (``tap | head``): quietly, without a second error at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
    except KeyboardInterrupt:
        pass
    return EXIT_OK
