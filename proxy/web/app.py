"""The aiohttp application: routes and the lifetime of everything the proxy holds.

Start-up and shutdown read top to bottom in :func:`_destinations_lifecycle`: the rules
file is loaded and its destinations built (Kafka producers started, topics ensured,
archive directories opened), the router wired into the pipeline and the rules file
watched; on shutdown (after aiohttp has let in-flight requests finish) best-effort
deliveries get their last chance, destinations are closed and the producers flushed so
nothing acknowledged is left in a local queue.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import web

from proxy.auth.authenticator import Authenticator
from proxy.config.settings import ProxyConfig
from proxy.destinations.kafka.spool_drainer import SpoolMetrics, SpoolRoots, spool_roots
from proxy.destinations.kafka.stranded import StrandedSpool
from proxy.destinations.registry import DestinationResources
from proxy.ingest.live_rules import LiveRules
from proxy.ingest.pipeline import BestEffortQueue, EventPipeline
from proxy.metrics.disk_space import DiskSpace
from proxy.metrics.process import KafkaReachability, ProxyMetrics
from proxy.metrics.workers import Siblings, WorkerSlot
from proxy.support.queued_bytes import Queue, QueueBudget
from proxy.support.request_errors import ClientFault, RequestError
from proxy.tap.hub import TapHub
from proxy.tap.relay import TapRelay
from proxy.validation import EventValidator
from proxy.validation.repairs import EventRepairer
from proxy.web import request_ids
from proxy.web.bytes_in_flight import BytesInFlight
from proxy.web.client_faults import ClientFaults, ServerLog
from proxy.web.connections import ConnectionGuard
from proxy.web.error_responses import error_response, response_of
from proxy.web.keys import (
    AUTHENTICATOR,
    BYTES_IN_FLIGHT,
    CLIENT_FAULTS,
    CONFIG,
    CONNECTIONS,
    METRICS,
    PIPELINE,
    QUEUED_BYTES,
    RULES,
    SHUTDOWN,
    SIBLINGS,
    TAP,
    TAP_RELAY,
    VALIDATOR,
    WORKER,
)
from proxy.web.lineage_endpoints import post_batch, post_event
from proxy.web.openapi import endpoint_of, serve_openapi
from proxy.web.readiness import destination_health, overall_status
from proxy.web.shutdown import ShutdownBudget
from proxy.web.status.endpoints import StatusPage
from proxy.web.tap_endpoint import get_tap
from routing_rules.loader import BUILTIN_RULES
from routing_rules.stats import RoutingStats

__all__ = ["LINEAGE_BATCH_PLAIN", "LINEAGE_PLAIN", "create_app", "server_options"]

log = logging.getLogger(__name__)

# Clients join "api/v1/lineage" onto whatever URL they were given, so any prefix works.
LINEAGE_PATH = r"/{prefix:(?:.*/)?}api/v1/lineage"
LINEAGE_PLAIN = "/api/v1/lineage"
LINEAGE_BATCH_PLAIN = LINEAGE_PLAIN + "/batch"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _errors_and_metrics(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The app's one middleware. The plain ingest URLs skip aiohttp's dispatch but not
    this: the ingest lane (:mod:`proxy.web.ingest_lane`) calls it around their handlers."""
    # The connection guard's hook lives here, not in a middleware of its own: one
    # coroutine per request fewer.
    connection = request.app[CONNECTIONS].request_started(request)
    # "lineage.prefixed" counts as "lineage": one label per endpoint, whatever the URL.
    endpoint = endpoint_of(request.match_info.route) or "other"
    request_id = request_ids.bind(request)
    try:
        response = await handler(request)
    except ClientFault as exc:
        # The client's doing (it left, or was too slow): counted apart, logged sparingly.
        request.app[CLIENT_FAULTS].record(exc.reason, exc.error, request.remote)
        response = response_of(exc)
    except RequestError as exc:
        request.app[METRICS].rejected.labels(exc.reason).inc()
        if exc.status < 500 or exc.reason == "loop_detected":
            request.app[CLIENT_FAULTS].refused(
                request, exc.status, exc.reason, exc.error, exc.details, exc.event
            )
        response = response_of(exc)
    except web.HTTPException as exc:
        response = error_response(
            exc.status, exc.reason, reason=exc.reason.lower().replace(" ", "_")
        )
    except Exception:
        # A bug of ours, never the client's input: log it whole, answer without internals.
        log.exception("unhandled error on %s %s", request.method, request.path)
        response = error_response(
            500, "internal error; the event was not stored", reason="internal_error"
        )
    finally:
        if connection is not None:
            connection.request_finished()
    response.headers[request_ids.HEADER] = request_id
    request.app[METRICS].request_counter(endpoint, response.status).inc()
    return response


async def _healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _readyz(request: web.Request) -> web.Response:
    health = await destination_health([d for d in request.app[RULES].destinations if d.durable])
    state, problems = overall_status(list(health.values()))
    status = 503 if state == "not_ready" else 200
    body: dict[str, Any] = {
        "ready": status == 200,
        # "degraded": events are taken, but not as they should be (Kafka down: spooled).
        "status": state,
        "problems": problems,
        "destinations": {name: h.ready for name, h in health.items()},
    }
    # Destinations that can say more (Kafka: whether it is spooling) add it here.
    notes = {name: h.details for name, h in health.items() if h.details is not None}
    if notes:
        body["details"] = notes
    return web.json_response(body, status=status)


async def _metrics(request: web.Request) -> web.Response:
    workers = request.app.get(SIBLINGS)
    return web.Response(
        body=request.app[METRICS].exposition() if workers is None else await workers.exposition(),
        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
    )


async def _destinations_lifecycle(app: web.Application) -> AsyncIterator[None]:
    config = app[CONFIG]
    routing = config.routing
    roots = await _spool_roots(app)
    resources = DestinationResources(config.kafka, routing.archive_root, roots)
    stats = RoutingStats()
    app[METRICS].registry.register(stats)
    app[METRICS].registry.register(SpoolMetrics(lambda: resources.spools))
    app[METRICS].registry.register(KafkaReachability(lambda: resources.producers))
    spool_top = config.kafka.spool.directory
    disks = DiskSpace({"spool": spool_top, "archive": routing.archive_root})
    app[METRICS].registry.register(disks)
    stranded = StrandedSpool()
    app[METRICS].registry.register(stranded)
    rules = LiveRules(routing.rules or BUILTIN_RULES, resources, stats)
    try:
        router = await rules.start()
        await resources.forward_leftovers()
    except BaseException:
        await resources.close(config.server.shutdown_timeout_seconds)
        raise
    app[RULES] = rules
    best_effort = BestEffortQueue(
        routing.best_effort_queue_size,
        routing.best_effort_concurrency,
        app[METRICS],
        app[QUEUED_BYTES],
    )
    repairer = EventRepairer(
        config.validation.enabled_repairs(), config.validation.naive_time_zones()
    )
    pipeline = EventPipeline(app[VALIDATOR], router, app[METRICS], best_effort, repairer, app[TAP])
    best_effort.start(pipeline.deliver_to)
    app[PIPELINE] = pipeline
    watchers = [asyncio.create_task(disks.watch(), name="disk-space")]
    if routing.reload_interval_seconds > 0:
        watchers.append(
            asyncio.create_task(rules.watch(routing.reload_interval_seconds), name="rules-watch")
        )
    # The record a failed preStop drain left (proxy/destinations/kafka/stranded.py) is at the top of
    # the spool directory: the process that drains that top reports it (one worker of N).
    if spool_top in (roots.own, *roots.orphans):
        watchers.append(asyncio.create_task(stranded.watch(spool_top), name="stranded-watch"))
    yield
    for watcher in watchers:
        watcher.cancel()
    await asyncio.gather(*watchers, return_exceptions=True)
    budget = app[SHUTDOWN]
    await best_effort.close(budget.remaining())
    await rules.close()
    await resources.close(budget.remaining())


async def _spool_roots(app: web.Application) -> SpoolRoots:
    directory = app[CONFIG].kafka.spool.directory
    worker = app.get(WORKER)
    if worker is None:
        return await asyncio.to_thread(spool_roots, directory)
    return await asyncio.to_thread(spool_roots, directory, worker.index, worker.count)


async def _siblings_lifecycle(app: web.Application) -> AsyncIterator[None]:
    siblings = app[SIBLINGS]
    await siblings.start()
    relay = app.get(TAP_RELAY)
    if relay is not None:
        relay.start()
    yield
    if relay is not None:
        await relay.close()
    await siblings.close()


def server_options(app: web.Application) -> dict[str, Any]:
    """Keyword arguments for aiohttp's runner that the proxy's guarantees depend on."""
    server = app[CONFIG].server
    return {
        # We inflate gzip ourselves, with a cap; aiohttp's own inflation has none.
        "auto_decompress": False,
        "shutdown_timeout": server.shutdown_timeout_seconds,
        "keepalive_timeout": server.keepalive_timeout_seconds,
        # A client's broken HTTP is counted and logged sparingly, not as our ERROR.
        "logger": ServerLog(app[CLIENT_FAULTS]),
        "access_log": None,
    }


def create_app(config: ProxyConfig, worker: WorkerSlot | None = None) -> web.Application:
    """Build the app; ``config.kafka.bootstrap_servers`` must be a real address by now.
    ``worker``: this process's place among the workers of ``serve --workers N``."""
    metrics = ProxyMetrics()
    faults = ClientFaults(metrics)
    guard = ConnectionGuard(config.server, faults, metrics)
    app = web.Application(middlewares=[_errors_and_metrics])
    app[CONFIG] = config
    app[METRICS] = metrics
    app[CLIENT_FAULTS] = faults
    app[CONNECTIONS] = guard
    app[AUTHENTICATOR] = Authenticator(config.auth)
    app[BYTES_IN_FLIGHT] = BytesInFlight(
        config.server.max_bytes_in_flight,
        {"Retry-After": str(config.server.retry_after_seconds)},
    )
    metrics.bytes_in_flight.set_function(lambda: app[BYTES_IN_FLIGHT].held)
    # Compiling every facet model is the expensive part of start-up; done once, here.
    app[VALIDATOR] = EventValidator(
        strict=config.validation.is_strict,
        extra_schema_dir=config.validation.extra_schema_dir,
    )
    app[SHUTDOWN] = ShutdownBudget(config.server.shutdown_timeout_seconds)
    app.on_shutdown.append(app[SHUTDOWN].start)
    app[QUEUED_BYTES] = budget = QueueBudget(config.server.max_queued_bytes)
    for queue in Queue:
        metrics.queued_bytes.labels(queue).set_function(functools.partial(budget.held_for, queue))
    app[TAP] = TapHub(budget=budget)
    metrics.registry.register(app[TAP])
    app.on_shutdown.append(app[TAP].on_shutdown)
    app.cleanup_ctx.append(_destinations_lifecycle)
    siblings = None
    if worker is not None:
        # Routes are added to the workers' private channel below; it starts with the app.
        app[WORKER] = worker
        app[SIBLINGS] = siblings = Siblings(worker, metrics)
        app.cleanup_ctx.append(_siblings_lifecycle)
    # The usual URL as plain routes, found by one lookup in aiohttp's index (and by
    # `serve`'s ingest lane without any); any other prefix through the regex routes
    # (their resolution cost ~3 µs more per request).
    app.router.add_post(LINEAGE_PLAIN, post_event, name="lineage")
    app.router.add_post(LINEAGE_BATCH_PLAIN, post_batch, name="lineage_batch")
    app.router.add_post(LINEAGE_PATH, post_event, name="lineage.prefixed")
    app.router.add_post(LINEAGE_PATH + "/batch", post_batch, name="lineage_batch.prefixed")
    app.router.add_get("/openapi.json", serve_openapi, name="openapi")
    app.router.add_get("/healthz", _healthz, name="healthz")
    app.router.add_get("/readyz", _readyz, name="readyz")
    app.router.add_get("/metrics", _metrics, name="metrics")
    if config.server.tap:
        app.router.add_get("/api/v1/tap", get_tap, name="tap")
        if siblings is not None:
            app[TAP_RELAY] = TapRelay(app[TAP], siblings)
    if config.server.status_page:
        StatusPage(
            metrics.registry, faults.recent, lambda: app[RULES].destinations, siblings
        ).add_to(app)
    return app
