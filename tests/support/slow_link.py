"""A TCP relay between an HTTP/1.1 client and a real server that slows the bodies of
chosen requests and records how far each request got.

Fault tests use it to make an upload window real and observable: with the relay between
the consumer and S3Proxy, the body of an S3 ``UploadPart`` crawls at ``bytes_per_second``
while every other request passes at full speed, so a test can kill the consumer while a
part is provably on the wire (``in_flight()``: the request line and how many of its body
bytes went through). It is a slow network link, not a double: the server behind it is the
real one and sees exactly the bytes the client sent, cut where the client died.

Only the client → server direction is parsed (request line, ``Content-Length``); the
answers flow back untouched, so ``Expect: 100-continue`` works as without the relay.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["RelayedRequest", "SlowLink"]

_CHUNK = 16 * 1024


@dataclass
class RelayedRequest:
    """One request seen by the relay: its request line, body length and bytes passed."""

    line: str
    length: int
    slowed: bool
    sent: int = 0

    @property
    def in_flight(self) -> bool:
        """Part of the body went through, not all of it."""
        return 0 < self.sent < self.length


class SlowLink:
    """Listens on 127.0.0.1:``port`` and relays to 127.0.0.1:``upstream_port``; while
    ``armed``, the body of a request whose request line satisfies ``slow_when`` goes
    through at ``bytes_per_second``."""

    def __init__(
        self, upstream_port: int, slow_when: Callable[[str], bool], bytes_per_second: int
    ) -> None:
        self.upstream_port = upstream_port
        self.slow_when = slow_when
        self.bytes_per_second = bytes_per_second
        self.armed = True
        self.requests: list[RelayedRequest] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> SlowLink:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def in_flight(self) -> list[RelayedRequest]:
        """Slowed requests whose body is part way through."""
        return [r for r in self.requests if r.slowed and r.in_flight]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:  # the server is down: the client sees the connection refused-ish
            writer.transport.abort()
            self._connections.discard(task)
            return
        back = asyncio.create_task(_pipe(up_reader, writer))
        try:
            await self._requests(reader, up_writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            # Abort, not close: a client that died mid-body leaves the server a cut request.
            up_writer.transport.abort()
            writer.transport.abort()
            back.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await back
            self._connections.discard(task)

    async def _requests(self, reader: asyncio.StreamReader, upstream: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            length = 0
            for header in lines[1:]:
                name, _, value = header.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
                elif name.strip().lower() == "transfer-encoding":
                    raise AssertionError("SlowLink relays Content-Length bodies only")
            request = RelayedRequest(lines[0], length, self.armed and self.slow_when(lines[0]))
            self.requests.append(request)
            upstream.write(head)
            await upstream.drain()
            while request.sent < length:
                size = _CHUNK if request.slowed else 1 << 20
                chunk = await reader.read(min(size, length - request.sent))
                if not chunk:
                    raise asyncio.IncompleteReadError(b"", length - request.sent)
                upstream.write(chunk)
                await upstream.drain()
                request.sent += len(chunk)
                if request.slowed:
                    # The throttle itself (a slow link), not a wait for a condition.
                    await asyncio.sleep(len(chunk) / self.bytes_per_second)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` to ``writer`` until end of stream."""
    while chunk := await reader.read(1 << 16):
        writer.write(chunk)
        await writer.drain()
    writer.close()
