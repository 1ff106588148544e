"""Turn an HTTP request body into JSON: size limits, gzip/deflate, lenient content types.

This is where an event enters. Everything here protects the process: a body is read
in chunks within a deadline and refused as soon as it passes the limit, and a
compressed body is inflated with a cap so that a gzip bomb costs us at most
``max_decompressed_bytes``. A client that leaves or stalls mid-body is a
:class:`ClientFault`, not an error of ours. An event nested deeper than the proxy can
write back is found here too (:func:`too_deep_at`), before anything looks inside it.
"""

from __future__ import annotations

import asyncio
import zlib
from typing import Any

import orjson
from aiohttp import web

from proxy.config.settings import ServerConfig
from proxy.support.request_errors import ClientFault, RequestError, detail
from proxy.validation.exact_json import WRITABLE_DEPTH, JSONDecodeError, loads, too_deep
from proxy.web.bytes_in_flight import Held

__all__ = [
    "MAX_EVENT_DEPTH",
    "could_nest_too_deep",
    "parse_json",
    "read_body",
    "too_deep_at",
]

MAX_EVENT_DEPTH = WRITABLE_DEPTH - 2
"""Levels of arrays and objects one event may hold (the event itself is level 1): what
the proxy can write, less the two levels that the documents carrying an event add (the
rejected route's envelope ``{"event": …}``, the tap relay's ``[{"event": …}]``). The
parser takes 1,024 levels; an event past this one is refused with 400 and a pointer."""

_CHUNK = 64 * 1024
# Ratios are only judged past this size: small JSON legitimately compresses very well.
_RATIO_FLOOR = 1024 * 1024
# Members of one gzip body at most: each costs a copy of what follows it.
_MAX_GZIP_MEMBERS = 64
# Inflated at most this much per step (each step is charged before the next).
_INFLATE_STEP = 1024 * 1024
_JSON_TYPES = ("application/json", "text/json", "application/x-json", "text/plain", "")


def _too_large(what: str, limit: int) -> RequestError:
    return RequestError(413, f"{what} exceeds the limit of {limit} bytes", reason="too_large")


async def _read_raw(request: web.Request, limits: ServerConfig, held: Held) -> bytes:
    limit = limits.max_body_bytes
    length = request.content_length
    if length is not None and length > limit:
        raise _too_large("request body", limit)
    if request.content.is_eof():  # the usual case: the whole body came with the header
        return await _read_chunks(request, limit, held)
    try:
        async with asyncio.timeout(limits.body_timeout_seconds):
            return await _read_chunks(request, limit, held)
    except TimeoutError:
        raise ClientFault(
            408,
            f"request body not received within {limits.body_timeout_seconds:g} s",
            reason="body_timeout",
        ) from None


def _left() -> ClientFault:
    return ClientFault(
        499, "client closed the connection before the whole body", reason="disconnected"
    )


async def _read_chunks(request: web.Request, limit: int, held: Held) -> bytes:
    chunks: list[bytes] = []
    try:
        return await _append_chunks(request, limit, held, chunks)
    finally:
        # The error raised out of here keeps this frame, and so the list, in a reference
        # cycle (frame → error → traceback → frame) until the garbage collector's next
        # full pass: emptied now, a refused body's bytes go back at once.
        chunks.clear()


async def _append_chunks(
    request: web.Request, limit: int, held: Held, chunks: list[bytes]
) -> bytes:
    size = 0
    try:
        while chunk := await request.content.read(_CHUNK):
            size += len(chunk)
            if size > limit:
                raise _too_large("request body", limit)
            held.take(len(chunk))
            chunks.append(chunk)
    except ConnectionError:
        raise _left() from None
    except RuntimeError as exc:
        # aiohttp's word for a read after the connection was lost (the client left
        # while this request waited for the loop, e.g. behind a gzip body).
        if str(exc) != "Connection closed.":
            raise
        raise _left() from None
    except web.RequestPayloadError as exc:  # bad chunked framing, short body
        raise ClientFault(400, f"malformed request body: {exc}", reason="bad_http") from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _not_valid(encoding: str, why: str) -> RequestError:
    return RequestError(400, f"body is not valid {encoding} data: {why}", reason="bad_encoding")


def _too_compressed(limits: ServerConfig) -> RequestError:
    return RequestError(
        413, f"compression ratio exceeds {limits.max_gzip_ratio:g}:1", reason="too_large"
    )


async def _inflate(body: bytes, encoding: str, limits: ServerConfig, held: Held) -> bytes:
    gzip = encoding in ("gzip", "x-gzip")
    wbits = 16 + zlib.MAX_WBITS if gzip else zlib.MAX_WBITS
    limit = limits.max_decompressed_bytes
    # Past this many inflated bytes the ratio is already too high: stop there, not at
    # max_decompressed_bytes (a 50 KB gzip bomb then costs 10 MB, not 50).
    ratio_limit = max(_RATIO_FLOOR, int(limits.max_gzip_ratio * max(len(body), 1)))
    parts: list[bytes] = []
    size = 0
    rest = body
    # A gzip body may hold several members one after another (RFC 1952 §2.2); each is
    # inflated, within one budget. Deflate is one stream: anything after it is refused.
    members = 0
    while rest:
        if members == _MAX_GZIP_MEMBERS:
            raise _not_valid(encoding, f"more than {_MAX_GZIP_MEMBERS} gzip members")
        members += 1
        inflater = zlib.decompressobj(wbits)
        # Inflated a step at a time, each step held before the next: a bomb stops at the
        # first step past a limit, the bytes in flight count what is really held, and
        # other requests are served between steps (50 MiB take a second on a busy core).
        while True:
            if parts:
                await asyncio.sleep(0)
            try:
                part = inflater.decompress(rest, min(_INFLATE_STEP, limit + 1 - size))
            except zlib.error as exc:
                raise _not_valid(encoding, str(exc)) from None
            rest = inflater.unconsumed_tail
            size += len(part)
            if size > limit:
                raise _too_large("decompressed body", limit)
            if size > ratio_limit:
                raise _too_compressed(limits)
            held.take(len(part))
            parts.append(part)
            if inflater.eof or not (part or rest):
                break
        if not inflater.eof:
            raise _not_valid(encoding, "the compressed data is truncated")
        rest = inflater.unused_data
        if rest and not gzip:
            raise _not_valid(encoding, "data follows the end of the compressed stream")
    return parts[0] if len(parts) == 1 else b"".join(parts)


async def read_body(request: web.Request, limits: ServerConfig, held: Held) -> bytes:
    """The request body, decompressed per Content-Encoding, within the configured limits;
    every byte read or inflated is charged to ``held`` (the process's bytes in flight)."""
    body = await _read_raw(request, limits, held)
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding in ("gzip", "x-gzip", "deflate"):
        return await _inflate(body, encoding, limits, held)
    raise RequestError(
        415,
        f"unsupported Content-Encoding {encoding!r}; use gzip, deflate or none",
        reason="bad_encoding",
    )


def parse_json(body: bytes, content_type: str) -> Any:
    """Parse JSON whatever the declared content type; say so if the type was the problem."""
    try:
        return loads(body)
    except JSONDecodeError as exc:
        hint = ""
        if content_type.lower() not in _JSON_TYPES:
            hint = f" (Content-Type was {content_type!r}; send application/json)"
        raise RequestError(
            400, f"body is not valid JSON{hint}", [detail("", str(exc))], reason="invalid_json"
        ) from None


def could_nest_too_deep(body: bytes) -> bool:
    """False when ``body`` has too few opening brackets to nest past
    :data:`MAX_EVENT_DEPTH`: two C-speed counts that spare nearly every body the walk
    of :func:`too_deep_at`."""
    return body.count(b"{") + body.count(b"[") > MAX_EVENT_DEPTH


def too_deep_at(event: Any) -> tuple[str | None, bytes | None]:
    """The JSON pointer of the first array or object in ``event`` nested past
    :data:`MAX_EVENT_DEPTH` (or None), and the event's compact JSON when the check wrote
    it (else None).

    Writing the event inside two more levels is the quick test (orjson, in C, refuses
    more than it can write); only an event it refuses is walked, without recursion. What
    it writes is the event's own JSON between two brackets on each side, so an event that
    reaches a destination unchanged need not be written again.
    """
    try:
        nested = orjson.dumps([[event]])
    except orjson.JSONEncodeError:
        return too_deep(event, MAX_EVENT_DEPTH), None
    return None, nested[2:-2]
