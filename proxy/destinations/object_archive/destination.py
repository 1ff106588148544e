"""The archive in object storage: the local archive's layout, in an S3-compatible bucket.

Keys: ``<prefix>/dt=YYYY-MM-DD/namespace=<value>/events-<time>-<host>-<pid>-<n>-<random>.jsonl``
(``.jsonl.gz`` with gzip) — the partitions and file names of
:mod:`proxy.destinations.archive.layout`, so replay and the Spark jobs read a bucket as
they read a directory (``s3a://bucket/prefix``).

- **Atomic objects.** An object is written with a multipart upload: parts (``part_bytes``)
  are uploaded as its buffer fills, so the memory an open object holds stays about one
  part, and the upload is *completed* only when the object is finished (``max_file_bytes``
  or ``max_file_age_seconds``). Until then nothing is visible under its key; a small object
  is one PUT, atomic too. gzip objects are a sequence of gzip members, one per part.
- **Acknowledged when complete.** A delivery resolves when the object holding its events
  is complete, so a consumer commits offsets only past what is stored. A delivery thus
  waits up to ``max_file_age_seconds``: consumers use batch mode (``batch_events``) so
  that many events share one wait.
- **Failures.** An upload that fails (the store is down, a timeout, a refusal) aborts its
  multipart upload and fails every event of that object with a retriable
  :class:`~proxy.destinations.base.DeliveryError`: the consumer retries them into a new
  object, and never dead-letters for an outage. A writer killed mid-upload leaves an
  incomplete multipart upload, invisible to readers; at start, uploads under the prefix
  older than ``abort_uploads_after_seconds`` are aborted (a bucket lifecycle rule that
  aborts incomplete uploads does the same on the store's side).
- **Library.** boto3 (botocore), synchronous, every call on a worker thread so the event
  loop never blocks: it is the reference S3 client, reads the whole AWS credential chain,
  and an object's parts go one after another anyway, so an async client would buy nothing
  here but a second dependency tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from proxy.destinations.archive.destination import gzip_member
from proxy.destinations.archive.layout import archive_file_name, event_partition
from proxy.destinations.base import DeliveryError, Destination
from proxy.destinations.object_archive.config import ObjectArchiveDestinationConfig
from proxy.support.secrets import secret_value

if TYPE_CHECKING:
    from proxy.destinations.registry import DestinationResources

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = [
    "ObjectArchiveDestination",
    "ObjectArchiveWriter",
    "build",
    "config_client",
    "s3_client",
    "split_archive_url",
]

log = logging.getLogger(__name__)

_URL_SCHEMES = ("s3://", "s3a://")


def split_archive_url(url: str) -> tuple[str, str] | None:
    """``(bucket, prefix)`` of an ``s3://`` or ``s3a://`` URL; None for anything else."""
    for scheme in _URL_SCHEMES:
        if url.startswith(scheme):
            bucket, _, prefix = url.removeprefix(scheme).partition("/")
            return bucket, prefix.strip("/")
    return None


def s3_client(
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    access_key_id_env: str | None = None,
    secret_access_key_env: str | None = None,
    path_style: bool = False,
    timeout_seconds: float = 10.0,
) -> S3Client:
    """A boto3 S3 client; credentials from the named variables, else the AWS chain.

    Checksums are sent only where S3 requires them: botocore's newer default trailing
    checksums are refused by several S3-compatible stores (GCS, S3Proxy)."""
    import boto3
    from botocore.config import Config

    key_id = secret = None
    if access_key_id_env is not None and secret_access_key_env is not None:
        key_id = secret_value(None, access_key_id_env)
        secret = secret_value(None, secret_access_key_env)
    config = Config(
        connect_timeout=timeout_seconds,
        read_timeout=timeout_seconds,
        # Few quick retries: the consumer's own retry loop (with its circuit breaker)
        # waits out an outage, not botocore.
        retries={"max_attempts": 2, "mode": "standard"},
        s3={"addressing_style": "path" if path_style else "auto"},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        max_pool_connections=32,
    )
    client: S3Client = boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        region_name=region,
        config=config,
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
    )
    return client


def config_client(config: ObjectArchiveDestinationConfig) -> S3Client:
    """The client an ``object_archive`` target's settings describe (writer and readers)."""
    return s3_client(
        endpoint_url=config.endpoint_url,
        region=config.region,
        access_key_id_env=config.access_key_id_env,
        secret_access_key_env=config.secret_access_key_env,
        path_style=config.path_style,
        timeout_seconds=config.request_timeout_seconds,
    )


@dataclass(eq=False)
class _OpenObject:
    """One object being written: its buffer, its upload and who waits for it."""

    key: str
    opened_at: float
    # Lines not yet handed to an upload (raw: gzip happens on the worker thread).
    buffer: bytearray = field(default_factory=bytearray)
    # Encoded bytes not yet uploaded as a part (shorter than a part).
    unsent: bytes = b""
    size: int = 0  # raw bytes written to it, for the size bound
    upload_id: str | None = None
    parts: list[dict[str, Any]] = field(default_factory=list)
    # Resolved with None once the object is complete, or with the error that failed it.
    waiters: list[asyncio.Future[DeliveryError | None]] = field(default_factory=list)
    # The last of its uploads (they run one after another).
    task: asyncio.Task[None] | None = None
    failed: DeliveryError | None = None


class ObjectArchiveWriter:
    """Append events to partitioned objects; see the module docstring.

    Lifetime: ``await start()`` → ``await write_many(...)``\\* → ``await close()``.
    """

    def __init__(self, config: ObjectArchiveDestinationConfig, name: str = "object_archive"):
        self.config = config
        self.name = name
        self._client: S3Client | None = None
        self._open: dict[str, _OpenObject] = {}
        self._finishing: set[asyncio.Task[None]] = set()
        self._ticker: asyncio.Task[None] | None = None
        self._sequence = 0
        self._tag = f"{socket.gethostname().split('.')[0]}-{os.getpid()}"
        # Why the last upload failed; None once one succeeds (for readiness).
        self._failure: str | None = None

    def _key(self, partition: str) -> str:
        self._sequence += 1
        name = archive_file_name("events", self._tag, self._sequence, gzip=self.config.gzip)
        return f"{self.config.key_prefix(partition)}{name}"

    def _error(self, reason: str) -> DeliveryError:
        return DeliveryError(self.name, reason, retriable=True)

    # -- lifetime ---------------------------------------------------------------------

    async def start(self) -> None:
        config = self.config
        self._client = await asyncio.to_thread(config_client, config)
        try:
            aborted = await asyncio.to_thread(self._abort_stale_uploads)
        except Exception as exc:  # the store may be down at start: not a reason to fail
            log.warning("%s: could not look for stale uploads: %s", self.name, exc)
        else:
            if aborted:
                log.warning("%s: aborted %d stale multipart uploads", self.name, aborted)
        self._ticker = asyncio.create_task(self._tick(), name=f"object-archive:{self.name}")

    async def close(self) -> None:
        """Finish every open object and wait for their uploads."""
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
        for partition in list(self._open):
            self._finish(partition)
        if self._finishing:
            await asyncio.gather(*self._finishing, return_exceptions=True)

    def writable(self) -> bool:
        """Whether the last upload succeeded (or none was tried)."""
        return self._client is not None and self._failure is None

    # -- writing ----------------------------------------------------------------------

    async def write_many(
        self, items: Sequence[tuple[dict[str, Any], bytes]]
    ) -> list[DeliveryError | None]:
        """Per event None once the object holding it is complete, else why not."""
        if self._client is None or self._ticker is None:
            raise self._error("object archive writer is not running")
        loop = asyncio.get_running_loop()
        by_partition: dict[str, list[int]] = {}
        for index, (event, _) in enumerate(items):
            by_partition.setdefault(event_partition(event), []).append(index)
        waits: dict[str, asyncio.Future[DeliveryError | None]] = {}
        now = time.monotonic()
        for partition, indexes in by_partition.items():
            current = self._open.get(partition)
            if current is None:
                current = self._open[partition] = _OpenObject(self._key(partition), now)
            for index in indexes:
                payload = items[index][1]
                current.buffer += payload
                current.buffer += b"\n"
                current.size += len(payload) + 1
            waiter: asyncio.Future[DeliveryError | None] = loop.create_future()
            current.waiters.append(waiter)
            waits[partition] = waiter
            if current.size >= self.config.max_file_bytes:
                self._finish(partition)
            elif len(current.buffer) >= self.config.part_bytes:
                self._upload(current, final=False)
        outcomes = {p: await w for p, w in waits.items()}
        errors: list[DeliveryError | None] = [None] * len(items)
        for partition, indexes in by_partition.items():
            for index in indexes:
                errors[index] = outcomes[partition]
        return errors

    async def _tick(self) -> None:
        """Finish objects that reached their age, even with no traffic."""
        interval = min(1.0, self.config.max_file_age_seconds / 4)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for partition, current in list(self._open.items()):
                if now - current.opened_at >= self.config.max_file_age_seconds:
                    self._finish(partition)

    def _finish(self, partition: str) -> None:
        """Detach ``partition``'s object (new events go to a new one) and complete it."""
        current = self._open.pop(partition)
        task = self._upload(current, final=True)
        self._finishing.add(task)
        task.add_done_callback(self._finishing.discard)

    def _upload(self, current: _OpenObject, *, final: bool) -> asyncio.Task[None]:
        """Queue an upload of the object's buffer (after its previous one)."""
        data, current.buffer = bytes(current.buffer), bytearray()
        current.task = asyncio.create_task(self._upload_after(current.task, current, data, final))
        return current.task

    async def _upload_after(
        self,
        previous: asyncio.Task[None] | None,
        current: _OpenObject,
        data: bytes,
        final: bool,
    ) -> None:
        if previous is not None:
            with contextlib.suppress(Exception):
                await previous
        if current.failed is None:
            try:
                await asyncio.to_thread(self._send, current, data, final)
                self._failure = None
            except Exception as exc:
                reason = f"upload of {current.key} failed: {_reason(exc)}"
                log.error("%s: %s", self.name, reason)
                current.failed = self._error(reason)
                self._failure = reason
                # The object is given up: later events go to a new one.
                for partition, open_object in list(self._open.items()):
                    if open_object is current:
                        del self._open[partition]
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(self._abort, current)
        if current.failed is not None:
            outcome: DeliveryError | None = current.failed
        elif final:
            outcome = None
        else:
            return
        waiters, current.waiters = current.waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(outcome)

    # -- blocking part, on a worker thread ----------------------------------------------

    def _send(self, current: _OpenObject, data: bytes, final: bool) -> None:
        """Encode ``data``, upload whole parts of it; with ``final``, complete the object."""
        client = self._client
        assert client is not None
        bucket = self.config.bucket
        encoded = current.unsent + (gzip_member(data) if self.config.gzip and data else data)
        current.unsent = b""
        if final and current.upload_id is None:
            if encoded:  # small enough for one PUT, atomic like a completed upload
                client.put_object(Bucket=bucket, Key=current.key, Body=encoded)
            return
        part = self.config.part_bytes
        while len(encoded) >= part or (final and encoded):
            # Every part but the last must hold at least S3's minimum (part_bytes >= 5 MiB).
            if current.upload_id is None:
                started = client.create_multipart_upload(Bucket=bucket, Key=current.key)
                current.upload_id = started["UploadId"]
            chunk, encoded = (encoded, b"") if final else (encoded[:part], encoded[part:])
            number = len(current.parts) + 1
            answer = client.upload_part(
                Bucket=bucket,
                Key=current.key,
                UploadId=current.upload_id,
                PartNumber=number,
                Body=chunk,
            )
            current.parts.append({"ETag": answer["ETag"], "PartNumber": number})
        current.unsent = encoded
        if final and current.upload_id is not None:
            client.complete_multipart_upload(
                Bucket=bucket,
                Key=current.key,
                UploadId=current.upload_id,
                MultipartUpload={"Parts": current.parts},  # type: ignore[typeddict-item]
            )

    def _abort(self, current: _OpenObject) -> None:
        if current.upload_id is not None and self._client is not None:
            self._client.abort_multipart_upload(
                Bucket=self.config.bucket, Key=current.key, UploadId=current.upload_id
            )

    def _abort_stale_uploads(self) -> int:
        """Abort multipart uploads under the prefix older than the configured bound."""
        client = self._client
        assert client is not None
        config = self.config
        cutoff = datetime.now(UTC) - timedelta(seconds=config.abort_uploads_after_seconds)
        prefix = f"{config.prefix}/" if config.prefix else ""
        aborted = 0
        pages = client.get_paginator("list_multipart_uploads")
        for page in pages.paginate(Bucket=config.bucket, Prefix=prefix):
            for upload in page.get("Uploads", []):
                if upload["Initiated"] < cutoff:
                    client.abort_multipart_upload(
                        Bucket=config.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                    )
                    aborted += 1
        return aborted


def _reason(exc: Exception) -> str:
    """A short reason for logs and errors (botocore's messages are long enough)."""
    return f"{type(exc).__name__}: {exc}"


class ObjectArchiveDestination(Destination):
    """The object archive as a destination (a consumer's target, or a rules file's)."""

    durable = True

    def __init__(self, name: str, writer: ObjectArchiveWriter) -> None:
        self.name = name
        self.writer = writer

    async def start(self) -> None:
        await self.writer.start()

    async def deliver(self, event: dict[str, Any], payload: bytes) -> None:
        [error] = await self.deliver_many([(event, payload)])
        if error is not None:
            raise error

    async def deliver_many(
        self, items: Sequence[tuple[dict[str, Any], bytes]]
    ) -> list[DeliveryError | None]:
        """Per event None once its object is complete, else why not."""
        try:
            return await self.writer.write_many(items)
        except DeliveryError as exc:
            return [exc] * len(items)

    async def deliver_batch(
        self, events: Sequence[dict[str, Any]], payloads: Sequence[bytes]
    ) -> None:
        """The consumer's batch mode: all stored, or the first error raised (the consumer
        retries the whole batch; objects completed before are duplicates then)."""
        errors = await self.deliver_many(list(zip(events, payloads, strict=True)))
        for error in errors:
            if error is not None:
                raise error

    async def ready(self) -> bool:
        return self.writer.writable()

    async def close(self) -> None:
        await self.writer.close()


async def build(
    name: str, config: ObjectArchiveDestinationConfig, resources: DestinationResources
) -> ObjectArchiveDestination:
    """An (unstarted) object archive destination (it needs none of ``resources``)."""
    return ObjectArchiveDestination(name, ObjectArchiveWriter(config, name))
