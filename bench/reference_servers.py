"""Reference servers the proxy is measured against (DESIGN.md §7), run as processes.

``parse``: a bare aiohttp handler that parses the JSON body with orjson and answers 200 —
the ceiling for a Python HTTP front end. ``forward``: the old Java proxy's behaviour —
parse, hand the body to a Kafka producer without waiting for the delivery report, answer
200. Neither validates; neither promises durability.
"""

from __future__ import annotations

import argparse
import threading

import orjson
from aiohttp import web
from confluent_kafka import Producer


def parse_app() -> web.Application:
    async def handle(request: web.Request) -> web.Response:
        orjson.loads(await request.read())
        return web.Response(text="ok")

    app = web.Application()
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
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post(r"/{tail:.*}", handle)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kind", choices=["parse", "forward"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bootstrap", default="")
    parser.add_argument("--topic", default="bench.naive")
    args = parser.parse_args()
    app = parse_app() if args.kind == "parse" else forward_app(args.bootstrap, args.topic)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
