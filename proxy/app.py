"""The aiohttp application: routes and the lifetime of everything the proxy holds.

Start-up and shutdown read top to bottom in :func:`_destinations_lifecycle`: the Kafka
producer is created, topics ensured, destinations wired into the pipeline; on shutdown
(after aiohttp has let in-flight requests finish) the producer is flushed so nothing
acknowledged is left in a local queue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import web

from proxy.auth import Authenticator
from proxy.config import ProxyConfig
from proxy.destinations import Destination
from proxy.destinations.kafka import KafkaDestination, KafkaProducer, producer_settings
from proxy.http_errors import RequestError, error_response
from proxy.lineage_endpoints import AUTHENTICATOR, CONFIG, PIPELINE, post_batch, post_event
from proxy.metrics import ProxyMetrics
from proxy.pipeline import EventPipeline
from proxy.router import SingleTopicRouter
from proxy.validation import EventValidator

__all__ = ["DESTINATIONS", "METRICS", "create_app", "server_options"]

log = logging.getLogger(__name__)

METRICS = web.AppKey("metrics", ProxyMetrics)
DESTINATIONS = web.AppKey("destinations", list[Destination])
VALIDATOR = web.AppKey("validator", EventValidator)

# Clients join "api/v1/lineage" onto whatever URL they were given, so any prefix works.
LINEAGE_PATH = r"/{prefix:(?:.*/)?}api/v1/lineage"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _errors_and_metrics(request: web.Request, handler: Handler) -> web.StreamResponse:
    endpoint = request.match_info.route.name or "other"
    try:
        response = await handler(request)
    except RequestError as exc:
        request.app[METRICS].rejected.labels(exc.reason).inc()
        response = exc.response()
    except web.HTTPException as exc:
        response = error_response(exc.status, exc.reason)
    except Exception:
        # A bug of ours, never the client's input: log it whole, answer without internals.
        log.exception("unhandled error on %s %s", request.method, request.path)
        response = error_response(500, "internal error; the event was not stored")
    request.app[METRICS].requests.labels(endpoint, str(response.status)).inc()
    return response


async def _healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _readyz(request: web.Request) -> web.Response:
    durable = [d for d in request.app[DESTINATIONS] if d.durable]
    states = await asyncio.gather(*(d.ready() for d in durable))
    checks = {d.name: ok for d, ok in zip(durable, states, strict=True)}
    status = 200 if all(states) else 503
    return web.json_response({"ready": status == 200, "destinations": checks}, status=status)


async def _metrics(request: web.Request) -> web.Response:
    return web.Response(
        body=request.app[METRICS].exposition(),
        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
    )


async def _destinations_lifecycle(app: web.Application) -> AsyncIterator[None]:
    config = app[CONFIG]
    kafka = config.kafka
    producer = KafkaProducer(producer_settings(kafka.bootstrap_servers, kafka.producer))
    producer.start()
    if kafka.create_topics:
        try:
            await asyncio.to_thread(
                producer.ensure_topics,
                {kafka.topic: (kafka.topic_partitions, kafka.topic_replication_factor)},
            )
        except Exception as exc:  # the broker may come later; /readyz says so meanwhile
            log.warning("could not ensure topic %s: %s", kafka.topic, exc)
    destination = KafkaDestination("kafka", producer, kafka.topic)
    app[DESTINATIONS] = [destination]
    app[PIPELINE] = EventPipeline(app[VALIDATOR], SingleTopicRouter([destination]), app[METRICS])
    yield
    timeout = config.server.shutdown_timeout_seconds
    left = await asyncio.to_thread(producer.flush, timeout)
    if left:
        log.error("%d Kafka deliveries still queued at shutdown", left)
    producer.stop()


def server_options(config: ProxyConfig) -> dict[str, Any]:
    """Keyword arguments for aiohttp's runner that the proxy's guarantees depend on."""
    return {
        # We inflate gzip ourselves, with a cap; aiohttp's own inflation has none.
        "auto_decompress": False,
        "shutdown_timeout": config.server.shutdown_timeout_seconds,
        "access_log": None,
    }


def create_app(config: ProxyConfig) -> web.Application:
    """Build the app; ``config.kafka.bootstrap_servers`` must be a real address by now."""
    app = web.Application(middlewares=[_errors_and_metrics])
    app[CONFIG] = config
    app[METRICS] = ProxyMetrics()
    app[AUTHENTICATOR] = Authenticator(config.auth)
    # Compiling every facet model is the expensive part of start-up; done once, here.
    app[VALIDATOR] = EventValidator(
        strict=config.validation.strict,
        extra_schema_dir=config.validation.extra_schema_dir,
    )
    app.cleanup_ctx.append(_destinations_lifecycle)
    app.router.add_post(LINEAGE_PATH, post_event, name="lineage")
    app.router.add_post(LINEAGE_PATH + "/batch", post_batch, name="lineage_batch")
    app.router.add_get("/healthz", _healthz, name="healthz")
    app.router.add_get("/readyz", _readyz, name="readyz")
    app.router.add_get("/metrics", _metrics, name="metrics")
    return app
