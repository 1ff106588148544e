"""The shared machinery of the target doubles: a loopback aiohttp server with knobs.

Knobs a test can turn: :meth:`TargetDouble.fail_next` answers the next N requests with a
given status (and ``Retry-After``), :meth:`fail_for` answers every request with a status
for some seconds (an outage with a clock), :meth:`down` stops listening (connection
refused) and :meth:`up` listens again on the same port, :meth:`refuse_matching` answers
every event a predicate picks with a status for ever (a poison event: the target is up and
takes the others), :meth:`hold_after` keeps requests waiting (unanswered, not stored) once
N events are stored, until :meth:`release`, ``delay_seconds`` makes every answer that much
slower (a busy target) and ``delay_of`` slows the answer to some bodies only (a target slow
on some writes). Accepted events
land in ``.events`` in arrival order; every request's status lands in ``.answers`` and
its time (monotonic) in ``.answer_times``, and the body of each request a knob failed in
``.failed_bodies`` (how often each event was tried during an outage). A double with a
``health_path`` answers GET there (200, or the outage's status during :meth:`fail_for`;
``health_status`` fails it alone) and counts the checks in ``.health_checks``. Used
directly it is a plain HTTP receiver (any JSON object or array at ``path`` → 200), the
generic target.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self

import orjson
from aiohttp import web

__all__ = ["TargetDouble"]


@dataclass
class _Failure:
    remaining: int
    status: int
    body: bytes
    headers: dict[str, str]


class TargetDouble:
    path = "/api/v1/lineage"
    health_path: str | None = None

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.answers: list[int] = []
        self.answer_times: list[float] = []
        self.failed_bodies: list[bytes] = []
        self._failing_until = 0.0
        self._failing_status = 503
        self.port = 0
        self._failures: list[_Failure] = []
        self._hold_after: int | None = None
        self._refused: list[tuple[Callable[[Any], bool], int, bytes]] = []
        self.refused: list[Any] = []  # the events refuse_matching answered, in order
        self._released = asyncio.Event()
        self.held = 0  # requests waiting on the hold right now
        self.delay_seconds = 0.0
        self.delay_of: Callable[[bytes], float] | None = None
        self.health_status: int | None = None  # set: the health check alone answers it
        self.health_checks = 0
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None

    @property
    def url(self) -> str:
        """Base URL (what a target's ``url`` setting takes)."""
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> Self:
        if not self.port:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                self.port = int(sock.getsockname()[1])
        app = web.Application()
        self.add_routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await self.up()
        return self

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post(self.path, self._handle)
        if self.health_path is not None:
            app.router.add_get(self.health_path, self._health)

    async def _health(self, request: web.Request) -> web.Response:
        self.health_checks += 1
        if time.monotonic() < self._failing_until:
            return web.Response(status=self._failing_status)
        if self.health_status is not None:
            return web.Response(status=self.health_status)
        return await self.healthy_answer(request)

    async def healthy_answer(self, request: web.Request) -> web.Response:
        """What the health check answers when the target is up."""
        return web.json_response({})

    async def up(self) -> None:
        assert self._runner is not None
        self._site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await self._site.start()

    async def down(self) -> None:
        """Stop listening: clients get "connection refused" until :meth:`up`."""
        if self._site is not None:
            await self._site.stop()
            self._site = None

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def fail_next(
        self,
        times: int,
        status: int = 503,
        body: bytes = b"",
        retry_after: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests with ``status`` instead of handling them."""
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        self._failures.append(_Failure(times, status, body, headers))

    def fail_for(self, seconds: float, status: int = 503) -> float:
        """Answer every request with ``status`` for ``seconds`` from now; returns the
        monotonic time the outage ends."""
        self._failing_until = time.monotonic() + seconds
        self._failing_status = status
        return self._failing_until

    def first_success_after(self, moment: float) -> float | None:
        """Monotonic time of the first 2xx answered after ``moment``, if any."""
        times = [
            t
            for t, status in zip(self.answer_times, self.answers, strict=True)
            if t >= moment and 200 <= status < 300
        ]
        return min(times, default=None)

    def refuse_matching(
        self, picks: Callable[[Any], bool], status: int = 500, body: bytes = b""
    ) -> None:
        """Answer every request whose JSON body ``picks`` with ``status`` and ``body``, for
        ever (kept in ``.refused``); other requests are handled as usual."""
        self._refused.append((picks, status, body))

    def _refusal(self, body: bytes) -> web.Response | None:
        if not self._refused:
            return None
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        for picks, status, answer in self._refused:
            if picks(document):
                self.refused.append(document)
                return web.Response(status=status, body=answer, content_type="application/json")
        return None

    def hold_after(self, stored: int) -> None:
        """Once ``stored`` events are kept, make later requests wait unanswered."""
        self._hold_after = stored
        self._released.clear()

    def release(self) -> None:
        self._hold_after = None
        self._released.set()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self._hold_after is not None and len(self.events) >= self._hold_after:
            self.held += 1
            try:
                await self._released.wait()
            finally:
                self.held -= 1
        if self.delay_seconds:
            await asyncio.sleep(self.delay_seconds)
        if self.delay_of is not None:
            await asyncio.sleep(self.delay_of(await request.read()))
        if time.monotonic() < self._failing_until:
            self.failed_bodies.append(await request.read())
            response = web.Response(status=self._failing_status)
        elif self._failures:
            self.failed_bodies.append(await request.read())
            failure = self._failures[0]
            failure.remaining -= 1
            if failure.remaining <= 0:
                self._failures.pop(0)
            response = web.Response(
                status=failure.status, body=failure.body, headers=failure.headers
            )
        else:
            body = await request.read()
            response = self._refusal(body) or await self.answer(request, body)
        self.answers.append(response.status)
        self.answer_times.append(time.monotonic())
        return response

    async def answer(self, request: web.Request, body: bytes) -> web.Response:
        """The target's documented behaviour; the generic receiver takes any JSON."""
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError:
            return web.json_response({"error": "not JSON"}, status=400)
        self.events.extend(document if isinstance(document, list) else [document])
        return web.Response(status=200)
