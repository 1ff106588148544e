"""``lineage-proxy serve`` with single-event ingest cut short after one stage.

Used by ``http_ingest.py --scenarios stages`` to show where a single event's CPU goes,
in the same run as the references: the proxy's own HTTP layer (connection guard, the
error/metrics middleware, request id, auth, body limits, JSON parse and answer), then
validation and authorization, then each destination of the default rules alone and
both. Stages:

- ``http``: read and parse the body, answer ``{"status": "success"}``; nothing checked,
  nothing stored.
- ``check``: ``http`` plus validation (repairs on) and the token's namespace check.

Every other request (batch, metrics, health) is served as usual. An event answered 200 is
counted in ``lineage_proxy_events_accepted_total`` as the whole proxy counts it (the
bench divides CPU by it).

Run: ``python bench/proxy_stages.py STAGE serve --config config.yaml`` (the arguments
after STAGE are ``lineage-proxy``'s).
"""

from __future__ import annotations

import sys
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proxy.ingest.pipeline import Accepted
from proxy.web import keys, lineage_endpoints

STAGES = ("http", "check")


async def _http_only(request: web.Request) -> web.Response:
    with request.app[keys.BYTES_IN_FLIGHT].request() as held:
        await lineage_endpoints._read_json(request, held)
    request.app[keys.PIPELINE].metrics.accepted.labels("run").inc()
    return lineage_endpoints._json(200, {"status": "success"})


async def _check_only(request: web.Request) -> web.Response:
    with request.app[keys.BYTES_IN_FLIGHT].request() as held:
        event, principal, _ = await lineage_endpoints._read_json(request, held)
    pipeline = request.app[keys.PIPELINE]
    if not isinstance(pipeline.check(event, principal), Accepted):
        return lineage_endpoints._json(400, {"status": "refused"})
    pipeline.metrics.accepted.labels("run").inc()
    return lineage_endpoints._json(200, {"status": "success"})


def _cut_short(stage: str) -> None:
    """Serve single events with the handler of ``stage``: set before proxy.web.app is first
    imported, which takes the handler it finds here."""
    assert "proxy.web.app" not in sys.modules, "proxy.web.app imported too early"
    lineage_endpoints.post_event = {"http": _http_only, "check": _check_only}[stage]


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in STAGES:
        print(f"usage: proxy_stages.py {{{'|'.join(STAGES)}}} serve ...", file=sys.stderr)
        sys.exit(2)
    _cut_short(sys.argv[1])
    from proxy.cli.main import main

    sys.argv = ["lineage-proxy", *sys.argv[2:]]
    sys.exit(main())
