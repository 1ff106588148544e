"""Turn an HTTP request body into JSON: size limits, gzip/deflate, lenient content types.

This is where an event enters. Everything here protects the process: a body is read
in chunks and refused as soon as it passes the limit, and a compressed body is inflated
with a cap so that a gzip bomb costs us at most ``max_decompressed_bytes``.
"""

from __future__ import annotations

import zlib
from typing import Any

import orjson
from aiohttp import web

from proxy.config import ServerConfig
from proxy.http_errors import RequestError, detail

__all__ = ["parse_json", "read_body"]

_CHUNK = 64 * 1024
# Ratios are only judged past this size: small JSON legitimately compresses very well.
_RATIO_FLOOR = 1024 * 1024
_JSON_TYPES = ("application/json", "text/json", "application/x-json", "text/plain", "")


def _too_large(what: str, limit: int) -> RequestError:
    return RequestError(413, f"{what} exceeds the limit of {limit} bytes", reason="too_large")


async def _read_raw(request: web.Request, limit: int) -> bytes:
    length = request.content_length
    if length is not None and length > limit:
        raise _too_large("request body", limit)
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.read(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise _too_large("request body", limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _inflate(body: bytes, encoding: str, limits: ServerConfig) -> bytes:
    wbits = 16 + zlib.MAX_WBITS if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
    inflater = zlib.decompressobj(wbits)
    limit = limits.max_decompressed_bytes
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise RequestError(
            400, f"body is not valid {encoding} data: {exc}", reason="bad_encoding"
        ) from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise _too_large("decompressed body", limit)
    if len(out) > _RATIO_FLOOR and len(out) > limits.max_gzip_ratio * max(len(body), 1):
        raise RequestError(
            413,
            f"compression ratio exceeds {limits.max_gzip_ratio:g}:1",
            reason="too_large",
        )
    return out


async def read_body(request: web.Request, limits: ServerConfig) -> bytes:
    """The request body, decompressed per Content-Encoding, within the configured limits."""
    body = await _read_raw(request, limits.max_body_bytes)
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding in ("gzip", "x-gzip", "deflate"):
        return _inflate(body, encoding, limits)
    raise RequestError(
        415,
        f"unsupported Content-Encoding {encoding!r}; use gzip, deflate or none",
        reason="bad_encoding",
    )


def parse_json(body: bytes, content_type: str) -> Any:
    """Parse JSON whatever the declared content type; say so if the type was the problem."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        hint = ""
        if content_type.lower() not in _JSON_TYPES:
            hint = f" (Content-Type was {content_type!r}; send application/json)"
        raise RequestError(
            400, f"body is not valid JSON{hint}", [detail("", str(exc))], reason="invalid_json"
        ) from None
