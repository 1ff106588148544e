"""``POST …/api/v1/lineage`` and ``POST …/api/v1/lineage/batch``.

Answers follow OpenLineage.yml: a single event gets 200 once every durable destination
holds it; a batch gets a summary with per-index failures, and one bad event never sinks
the good ones beside it. Pointers in batch failures are into the whole body (``/3/run/runId``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import web

from proxy.auth.principal import Principal
from proxy.destinations import DeliveryError, TooLarge
from proxy.destinations.hops import HEADER as HOPS_HEADER
from proxy.destinations.hops import TooManyHops, take_request_hops
from proxy.ingest.pipeline import Accepted, EventPipeline, Rejection, RejectionReason
from proxy.support.logs import REQUEST_ID
from proxy.support.request_errors import RequestError, detail
from proxy.web.bytes_in_flight import Held
from proxy.web.ingest import (
    MAX_EVENT_DEPTH,
    could_nest_too_deep,
    parse_json,
    read_body,
    too_deep_at,
)
from proxy.web.keys import AUTHENTICATOR, BYTES_IN_FLIGHT, CLIENT_FAULTS, CONFIG, PIPELINE
from proxy.web.principal import principal_of

__all__ = ["post_batch", "post_event"]

# Yield to the loop this often while checking a large batch, so one batch cannot starve
# every other request of the event loop.
_YIELD_EVERY = 64


# Said with a 2xx when Kafka could not confirm in time and the event waits, fsynced, in
# the proxy's local spool (docs/clients/durability.md).
_SPOOLED = {"X-Lineage-Spooled": "true"}


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, body=orjson.dumps(body), content_type="application/json", headers=headers
    )


def _retry_after(request: web.Request) -> dict[str, str]:
    return {"Retry-After": str(request.app[CONFIG].server.retry_after_seconds)}


# Said of an event nested deeper than the proxy can store (ingest.MAX_EVENT_DEPTH).
_TOO_DEEP = f"nested more than {MAX_EVENT_DEPTH} levels of arrays and objects deep"


async def _read_json(request: web.Request, held: Held) -> tuple[Any, Principal, bool]:
    """The parsed body, who sent it, and whether it could hold an event nested too deep.
    The body's bytes are charged to ``held`` until the request is answered."""
    principal = principal_of(request.app[AUTHENTICATOR], request)
    _take_hops(request)
    body = await read_body(request, request.app[CONFIG].server, held)
    value = parse_json(body, request.content_type if request.body_exists else "")
    return value, principal, could_nest_too_deep(body)


def _checked(
    pipeline: EventPipeline, event: Any, principal: Principal, maybe_deep: bool
) -> Accepted | Rejection:
    """:meth:`EventPipeline.check`, after the depth check when the body calls for it."""
    if not maybe_deep:
        return pipeline.check(event, principal)
    pointer, written = too_deep_at(event)
    if pointer is None:
        return pipeline.check(event, principal, written)
    # Checked before anything else looks at the event: validation, repairs, rules and
    # every destination then only ever see what the proxy can write back.
    return Rejection(
        400,
        RejectionReason.TOO_DEEP,
        "event nested too deeply to be stored; nothing was stored",
        [detail(pointer, _TOO_DEEP)],
    )


def _take_hops(request: web.Request) -> None:
    """The loop guard (proxy.destinations.hops): 508 for an event that passed too many
    proxies — a consumer pointed back at its own proxy ends after one round."""
    try:
        take_request_hops(request.headers.get(HOPS_HEADER))
    except TooManyHops as exc:
        raise RequestError(508, str(exc), reason="loop_detected") from None
    except ValueError:
        value = request.headers.get(HOPS_HEADER)
        raise RequestError(
            400, f"the {HOPS_HEADER} header must be a count of proxies, got {value!r}"
        ) from None


def _delivery_failure(error: DeliveryError) -> Rejection:
    if isinstance(error, TooLarge):
        # Found before any destination was written: nothing is stored anywhere.
        message = (
            f"{error.what} is {error.size} bytes; "
            f"destination {error.destination!r} takes {error.limit}"
        )
        if error.pointer:
            message += "; its key and headers repeat this field: shorten it"
        return Rejection(
            413,
            RejectionReason.TOO_LARGE,
            "event too large; nothing was stored",
            [detail(error.pointer, message)],
        )
    # Short and stable for the client; the cause (paths, broker errors) is in our log.
    name = error.destination
    if error.retriable:
        return Rejection(
            503, RejectionReason.UNAVAILABLE, f"{name} unavailable, retry later", retriable=True
        )
    return Rejection(422, RejectionReason.UNDELIVERABLE, f"{name} refused the event")


async def post_event(request: web.Request) -> web.Response:
    with request.app[BYTES_IN_FLIGHT].request() as held:
        return await _post_event(request, held)


async def _post_event(request: web.Request, held: Held) -> web.Response:
    event, principal, maybe_deep = await _read_json(request, held)
    pipeline = request.app[PIPELINE]
    rejection = _checked(pipeline, event, principal, maybe_deep)
    if isinstance(rejection, Accepted):
        accepted = rejection
        try:
            spooled = await pipeline.deliver(accepted.event, accepted.written)
        except DeliveryError as error:
            rejection = _delivery_failure(error)
        else:
            body: dict[str, Any] = {"status": "success"}
            if accepted.repairs:
                body["repaired"] = [repair.as_json() for repair in accepted.repairs]
            return _json(200, body, _SPOOLED if spooled else None)
    elif rejection.reason is RejectionReason.INVALID:
        await pipeline.deliver_rejected(event, rejection)
    headers = _retry_after(request) if rejection.retriable else None
    raise RequestError(
        rejection.status,
        rejection.error,
        rejection.details,
        headers=headers,
        reason=rejection.reason,
        event=event,
    )


async def post_batch(request: web.Request) -> web.Response:
    with request.app[BYTES_IN_FLIGHT].request() as held:
        return await _post_batch(request, held)


async def _post_batch(request: web.Request, held: Held) -> web.Response:
    events, principal, maybe_deep = await _read_json(request, held)
    if not isinstance(events, list):
        raise RequestError(
            400,
            "a batch must be a JSON array of events",
            [detail("", f"got a JSON {type(events).__name__}")],
            reason="invalid",
        )
    limit = request.app[CONFIG].server.max_batch_events
    if len(events) > limit:
        raise RequestError(413, f"a batch may hold at most {limit} events", reason="too_large")

    pipeline = request.app[PIPELINE]
    failures: dict[int, Rejection] = {}
    valid: dict[int, Accepted] = {}
    for index, event in enumerate(events):
        if index and index % _YIELD_EVERY == 0:
            await asyncio.sleep(0)
        checked = _checked(pipeline, event, principal, maybe_deep)
        if isinstance(checked, Accepted):
            valid[index] = checked
        else:
            failures[index] = checked

    invalid = [i for i, r in failures.items() if r.reason is RejectionReason.INVALID]
    # Every valid event in one go: one future per destination for the whole request.
    deliveries = pipeline.deliver_many(
        [accepted.event for accepted in valid.values()],
        [accepted.written for accepted in valid.values()],
    )
    if invalid:
        outcomes, _ = await asyncio.gather(
            deliveries,
            asyncio.gather(
                *(pipeline.deliver_rejected(events[i], failures[i]) for i in invalid),
                return_exceptions=True,
            ),
        )
    else:
        outcomes = await deliveries
    spooled = any(outcome is True for outcome in outcomes)
    for index, outcome in zip(valid, outcomes, strict=True):
        if isinstance(outcome, DeliveryError):
            failures[index] = _delivery_failure(outcome)
    for index, rejection in failures.items():
        pipeline.metrics.rejected.labels(rejection.reason).inc()
        if rejection.status < 500:
            request.app[CLIENT_FAULTS].refused(
                request,
                rejection.status,
                rejection.reason,
                f"event {index}: {rejection.error}",
                [{**d, "pointer": f"/{index}{d['pointer']}"} for d in rejection.details],
                events[index],
            )
    repaired = {i: a for i, a in valid.items() if a.repairs and i not in failures}
    response = _batch_response(request, len(events), failures, repaired)
    if spooled:
        response.headers.update(_SPOOLED)
    return response


def _batch_response(
    request: web.Request,
    received: int,
    failures: dict[int, Rejection],
    repaired: dict[int, Accepted],
) -> web.Response:
    retriable = sum(1 for r in failures.values() if r.retriable)
    summary = {
        "received": received,
        "successful": received - len(failures),
        "failed": len(failures),
        "retriable": retriable,
        "non_retriable": len(failures) - retriable,
    }
    failed_events = [
        {
            "index": index,
            "reason": rejection.error,
            "retriable": rejection.retriable,
            "status": rejection.status,
            "details": [detail(f"/{index}{d['pointer']}", d["message"]) for d in rejection.details],
        }
        for index, rejection in sorted(failures.items())
    ]
    body: dict[str, Any] = {"summary": summary, "failed_events": failed_events}
    if repaired:
        # Stored, but not as sent: per index, what was changed (pointers into the body).
        body["repaired_events"] = [
            {"index": index, "repairs": [r.as_json(f"/{index}") for r in accepted.repairs]}
            for index, accepted in sorted(repaired.items())
        ]
    if not failures:
        return _json(200, {"status": "success", **body})
    if summary["successful"]:
        return _json(200, {"status": "partial_success", **body})
    # Nothing was stored: say so with a status the client acts on (retry or fix).
    failure = {"status": "failure", "request_id": REQUEST_ID.get()}
    if retriable:
        return _json(
            503, {**failure, "error": "no event was stored", **body}, _retry_after(request)
        )
    return _json(400, {**failure, "error": "no event was accepted", **body})
