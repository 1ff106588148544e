"""Connection limits aiohttp does not have: a header deadline and a cap on connections.

aiohttp closes idle keep-alive connections (``keepalive_timeout``) but gives a client
that sends a request header one byte at a time (slowloris) as long as it likes, and
accepts connections until the process runs out of file descriptors. Each accepted
connection is therefore wrapped in a small protocol that

- answers 503 and closes at once when ``max_connections`` are already open;
- starts a header deadline when the connection opens, and again at the first byte of
  each following request; if the header is not complete by then (the request never
  reached a handler), answers 408 and closes.

Everything else is aiohttp's own handling, untouched. The wrapper sees every byte first
but only forwards it; what it adds per request is one timer.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import ssl
from collections.abc import Callable
from typing import cast

from aiohttp import web

from proxy.config.settings import ServerConfig
from proxy.metrics.process import ProxyMetrics
from proxy.support.request_errors import error_body
from proxy.web.client_faults import ClientFaults

__all__ = ["ConnectionGuard", "GuardedSite"]

log = logging.getLogger(__name__)

# File descriptors kept for everything but client connections: Kafka sockets, archive
# files, the listening socket, consumers running in the same process.
_FD_RESERVE = 256


def _canned(status: int, phrase: str, error: str, reason: str, extra: str = "") -> bytes:
    """A whole HTTP response written straight to a transport that aiohttp does not own."""
    body = error_body(error, reason)
    head = (
        f"HTTP/1.1 {status} {phrase}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n"
    )
    return head.encode() + body


_HEADER_TIMEOUT = _canned(
    408, "Request Timeout", "request header not received in time", "header_timeout"
)
_TOO_MANY = _canned(
    503,
    "Service Unavailable",
    "too many open connections, retry",
    "too_many_connections",
    "Retry-After: 1\r\n",
)


def _connection_limit(configured: int) -> int:
    """``configured``, lowered to what the open-file limit leaves for client sockets."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return configured
    allowed = max(soft - _FD_RESERVE, 1)
    if configured > allowed:
        log.warning(
            "server.max_connections=%d lowered to %d: the open-file limit is %d (ulimit -n)",
            configured,
            allowed,
            soft,
        )
        return allowed
    return configured


class ConnectionGuard:
    """Wraps each connection (see the module docstring); one per app."""

    def __init__(self, limits: ServerConfig, faults: ClientFaults, metrics: ProxyMetrics) -> None:
        self.max_connections = limits.max_connections
        self.header_timeout = limits.header_timeout_seconds
        self.faults = faults
        self._metrics = metrics
        self._open: dict[web.RequestHandler, _Connection] = {}
        metrics.open_connections.set_function(lambda: len(self._open))

    def apply_fd_limit(self) -> None:
        """Lower the cap to what the process's open-file limit allows (at start)."""
        self.max_connections = _connection_limit(self.max_connections)

    def protocol_factory(self, server: web.Server) -> Callable[[], asyncio.Protocol]:
        return lambda: _Connection(self, server)

    def request_started(self, request: web.Request) -> _Connection | None:
        """A request reached a handler: its header is complete, stop that connection's
        clock. The caller (the app's one middleware: no middleware of its own, which would
        cost a coroutine per request) calls ``request_finished()`` on the connection
        returned once the request is answered."""
        connection = self._open.get(request.protocol)
        if connection is not None:
            connection.request_started()
        return connection

    def _refuse(self, transport: asyncio.Transport) -> None:
        self._metrics.connections_refused.inc()
        transport.write(_TOO_MANY)
        transport.close()


class _Connection(asyncio.Protocol):
    """Sits between the transport and aiohttp's handler for one connection."""

    __slots__ = (
        "_guard",
        "_handler",
        "_loop",
        "_server",
        "_timer",
        "_transport",
        "_waiting_header",
    )

    def __init__(self, guard: ConnectionGuard, server: web.Server) -> None:
        # Looked up once per connection: on Python 3.11 every get_running_loop() is a
        # getpid() system call, and the clock restarts for every request.
        self._loop = asyncio.get_running_loop()
        self._guard = guard
        self._server = server
        self._handler: web.RequestHandler | None = None
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        # True between requests: the next bytes start a header and its deadline.
        self._waiting_header = True

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        # A stream transport; uvloop's does not subclass asyncio.Transport, so no isinstance.
        transport = cast(asyncio.Transport, base)
        guard = self._guard
        if len(guard._open) >= guard.max_connections:
            guard._refuse(transport)
            return
        self._transport = transport
        self._handler = self._server()
        guard._open[self._handler] = self
        self._start_clock()  # a fresh connection owes its first header from now
        self._handler.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._handler is None:
            return
        if self._waiting_header and self._timer is None:
            self._start_clock()
        self._handler.data_received(data)

    def eof_received(self) -> None:
        if self._handler is not None:
            self._handler.eof_received()

    def pause_writing(self) -> None:
        if self._handler is not None:
            self._handler.pause_writing()

    def resume_writing(self) -> None:
        if self._handler is not None:
            self._handler.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_clock()
        if self._handler is not None:
            self._guard._open.pop(self._handler, None)
            self._handler.connection_lost(exc)
            self._handler = None

    def request_started(self) -> None:
        self._waiting_header = False
        self._stop_clock()

    def request_finished(self) -> None:
        self._waiting_header = True

    def _start_clock(self) -> None:
        self._timer = self._loop.call_later(self._guard.header_timeout, self._header_overdue)

    def _stop_clock(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _header_overdue(self) -> None:
        self._timer = None
        transport = self._transport
        if not self._waiting_header or transport is None or transport.is_closing():
            return
        peer = transport.get_extra_info("peername")
        self._guard.faults.record(
            "header_timeout",
            f"no complete request header within {self._guard.header_timeout:g} s",
            peer[0] if peer else None,
        )
        transport.write(_HEADER_TIMEOUT)
        transport.close()


class GuardedSite(web.BaseSite):
    """A TCP site (TLS with ``ssl_context``) whose connections go through a
    :class:`ConnectionGuard`."""

    def __init__(
        self,
        runner: web.AppRunner,
        guard: ConnectionGuard,
        host: str,
        port: int,
        *,
        backlog: int = 1024,
        ssl_context: ssl.SSLContext | None = None,
        reuse_port: bool = False,
    ) -> None:
        super().__init__(runner, backlog=backlog, ssl_context=ssl_context)
        self._guard = guard
        self._host = host
        self._port = port
        # Several worker processes listen on one port (SO_REUSEPORT): the kernel spreads
        # new connections over them.
        self._reuse_port = reuse_port

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was asked for), once started."""
        server = self._server  # typed AbstractServer by aiohttp; create_server() gives a Server
        if isinstance(server, asyncio.Server) and server.sockets:
            return int(server.sockets[0].getsockname()[1])
        return self._port

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._host}:{self.port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            self._guard.protocol_factory(server),
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=True,
            reuse_port=self._reuse_port,
            ssl=self._ssl_context,
            # The handshake comes before the header's own deadline starts: same budget.
            ssl_handshake_timeout=self._guard.header_timeout if self._ssl_context else None,
        )
