"""Reference servers the proxy is measured against in the same run, run as processes.

``parse``: a bare aiohttp handler that parses the JSON body with orjson and answers 200 —
the ceiling for a Python HTTP front end. ``forward``: the old Java proxy's behaviour —
parse, hand the body to a Kafka producer without waiting for the delivery report, answer
200. Neither validates; neither promises durability. ``durable``: the durable forwarder
— parse, produce every event with acks=all + idempotence, answer 200 once
the request's delivery reports are all in (one future per request, reports handed to the
loop once per poll); it validates nothing. It shows what waiting for Kafka costs by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
from typing import Any

import orjson
from aiohttp import web
from confluent_kafka import Producer

# The proxy's own default limit (server.max_body_bytes is 5 MiB; a batch of 1,000 events is
# about 2.8 MB); aiohttp's default of 1 MiB would answer such a batch 413 without parsing it.
MAX_BODY_BYTES = 5 * 1024 * 1024
SERVED = web.AppKey("served", list)


def _app() -> web.Application:
    """An application that answers ``GET /served`` with how many events it has answered
    200 for: the bench divides the server's CPU by that, not by wrk's count of responses
    (wrk leaves requests unanswered at the end of a run that the server still works on)."""
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[SERVED] = [0]

    async def served(request: web.Request) -> web.Response:
        return web.Response(text=str(request.app[SERVED][0]))

    app.router.add_get("/served", served)
    return app


def _count(request: web.Request, document: Any) -> None:
    request.app[SERVED][0] += len(document) if isinstance(document, list) else 1


def parse_app() -> web.Application:
    async def handle(request: web.Request) -> web.Response:
        _count(request, orjson.loads(await request.read()))
        return web.Response(text="ok")

    app = _app()
    app.router.add_post(r"/{tail:.*}", handle)
    return app


def forward_app(bootstrap: str, topic: str) -> web.Application:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            producer.poll(0.05)

    threading.Thread(target=poll, daemon=True).start()

    async def handle(request: web.Request) -> web.Response:
        body = await request.read()
        document = orjson.loads(body)
        for event in document if isinstance(document, list) else [document]:
            while True:
                try:
                    producer.produce(topic, orjson.dumps(event))
                    break
                except BufferError:
                    producer.poll(0.01)
        _count(request, document)
        return web.Response(text="ok")

    app = _app()
    app.router.add_post(r"/{tail:.*}", handle)
    return app


class _RequestDone:
    """One future per request, settled when its last event's delivery report is in."""

    __slots__ = ("failed", "future", "left")

    def __init__(self, future: asyncio.Future[None], events: int) -> None:
        self.future = future
        self.left = events
        self.failed = False


def durable_app(bootstrap: str, topic: str) -> web.Application:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "acks": "all",
            "enable.idempotence": True,
            "compression.type": "lz4",
        }
    )
    stop = threading.Event()
    reports: list[tuple[_RequestDone, bool]] = []
    loop: asyncio.AbstractEventLoop | None = None

    def settle(batch: list[tuple[_RequestDone, bool]]) -> None:
        for done, ok in batch:
            done.failed |= not ok
            done.left -= 1
            if done.left == 0 and not done.future.done():
                done.future.set_result(None)

    def poll() -> None:
        nonlocal reports
        while not stop.is_set():
            producer.poll(0.05)
            if reports and loop is not None:
                batch, reports = reports, []
                loop.call_soon_threadsafe(settle, batch)

    threading.Thread(target=poll, daemon=True).start()

    async def handle(request: web.Request) -> web.Response:
        nonlocal loop
        loop = loop or asyncio.get_running_loop()
        document: Any = orjson.loads(await request.read())
        events = document if isinstance(document, list) else [document]
        done = _RequestDone(loop.create_future(), len(events))

        def on_delivery(err: object, msg: object) -> None:
            reports.append((done, err is None))

        for event in events:
            while True:
                try:
                    producer.produce(topic, orjson.dumps(event), on_delivery=on_delivery)
                    break
                except BufferError:
                    await asyncio.sleep(0.005)
        if events:
            await done.future
        if done.failed:
            return web.Response(status=503, text="not delivered")
        _count(request, events)
        return web.Response(text="ok")

    app = _app()
    app.router.add_post(r"/{tail:.*}", handle)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kind", choices=["parse", "forward", "durable"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bootstrap", default="")
    parser.add_argument("--topic", default="bench.naive")
    args = parser.parse_args()
    if args.kind == "parse":
        app = parse_app()
    elif args.kind == "forward":
        app = forward_app(args.bootstrap, args.topic)
    else:
        app = durable_app(args.bootstrap, args.topic)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
