"""Every typed key of the aiohttp application's state, in one place.

A handler reads what the app holds through these keys (``request.app[PIPELINE]``), so
that aiohttp and mypy know each value's type. They live apart from the modules that
fill or read them so that any module of the web layer may use any key without importing
another endpoint; the types are imported for type checking only, so this module imports
nothing of the project when it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from proxy.auth.authenticator import Authenticator
    from proxy.config.settings import ProxyConfig
    from proxy.ingest.live_rules import LiveRules
    from proxy.ingest.pipeline import EventPipeline
    from proxy.metrics.process import ProxyMetrics
    from proxy.metrics.workers import Siblings, WorkerSlot
    from proxy.support.queued_bytes import QueueBudget
    from proxy.tap.hub import TapHub
    from proxy.tap.relay import TapRelay
    from proxy.validation import EventValidator
    from proxy.web.bytes_in_flight import BytesInFlight
    from proxy.web.client_faults import ClientFaults
    from proxy.web.connections import ConnectionGuard
    from proxy.web.shutdown import ShutdownBudget

__all__ = [
    "AUTHENTICATOR",
    "BYTES_IN_FLIGHT",
    "CLIENT_FAULTS",
    "CONFIG",
    "CONNECTIONS",
    "METRICS",
    "PIPELINE",
    "QUEUED_BYTES",
    "RULES",
    "SHUTDOWN",
    "SIBLINGS",
    "TAP",
    "TAP_RELAY",
    "VALIDATOR",
    "WORKER",
]

CONFIG: web.AppKey[ProxyConfig] = web.AppKey("config")
PIPELINE: web.AppKey[EventPipeline] = web.AppKey("pipeline")
AUTHENTICATOR: web.AppKey[Authenticator] = web.AppKey("authenticator")
BYTES_IN_FLIGHT: web.AppKey[BytesInFlight] = web.AppKey("bytes_in_flight")
METRICS: web.AppKey[ProxyMetrics] = web.AppKey("metrics")
# The one budget of the tap's and the best-effort deliveries' queues.
QUEUED_BYTES: web.AppKey[QueueBudget] = web.AppKey("queued_bytes")
RULES: web.AppKey[LiveRules] = web.AppKey("rules")
VALIDATOR: web.AppKey[EventValidator] = web.AppKey("validator")
CONNECTIONS: web.AppKey[ConnectionGuard] = web.AppKey("connections")
CLIENT_FAULTS: web.AppKey[ClientFaults] = web.AppKey("client_faults")
TAP: web.AppKey[TapHub] = web.AppKey("tap")
TAP_RELAY: web.AppKey[TapRelay] = web.AppKey("tap_relay")
SHUTDOWN: web.AppKey[ShutdownBudget] = web.AppKey("shutdown")
# Set when this process is one worker of `serve --workers N` (absent: the only process).
WORKER: web.AppKey[WorkerSlot] = web.AppKey("worker")
SIBLINGS: web.AppKey[Siblings] = web.AppKey("siblings")
