"""A double of Egeria's lineage integrator REST API, reproducing its documented answers.

Path: ``/servers/{server}/open-metadata/integration-services/lineage-integrator/``
``users/{user}/api/v1/lineage``.
Egeria answers HTTP **200 even on failure**; the real outcome is ``relatedHTTPCode`` in
the JSON body:

- success → 200 ``{"class": "VoidResponse", "relatedHTTPCode": 200}`` (event kept);
- a server name it does not host → 200 with ``relatedHTTPCode: 404`` and
  ``OMAG-MULTI-TENANT-404-001``;
- a body that is not an OpenLineage JSON object → 200 with ``relatedHTTPCode: 400``;
- :meth:`EgeriaDouble.fail_related` makes the next N answers 200 with a given
  ``relatedHTTPCode`` (e.g. 500: the server side failed).
"""

from __future__ import annotations

import orjson
from aiohttp import web

from tests.support.doubles.target_double import TargetDouble

__all__ = ["EgeriaDouble"]


def _void(code: int, message: str | None = None) -> web.Response:
    body: dict[str, object] = {"class": "VoidResponse", "relatedHTTPCode": code}
    if message is not None:
        body["exceptionClassName"] = "org.odpi.openmetadata.frameworks.connectors.ffdc"
        body["exceptionErrorMessage"] = message
    return web.json_response(body, status=200)


class EgeriaDouble(TargetDouble):
    path = (
        "/servers/{server}/open-metadata/integration-services/"
        "lineage-integrator/users/{user}/api/v1/lineage"
    )

    def __init__(self, server: str = "integration-daemon") -> None:
        super().__init__()
        self.server = server
        self._related_failures: list[int] = []

    def fail_related(self, times: int, related_code: int = 500) -> None:
        self._related_failures.extend([related_code] * times)

    async def answer(self, request: web.Request, body: bytes) -> web.Response:
        server, user = request.match_info["server"], request.match_info["user"]
        if server != self.server:
            return _void(
                404,
                f"OMAG-MULTI-TENANT-404-001 The OMAG Server {server} is not available "
                f"to service a request from user {user}",
            )
        if self._related_failures:
            code = self._related_failures.pop(0)
            return _void(code, f"OMAG-LINEAGE-INTEGRATOR-{code}-001 simulated failure")
        try:
            event = orjson.loads(body)
        except orjson.JSONDecodeError:
            event = None
        if not isinstance(event, dict):
            return _void(400, "OMAG-COMMON-400-001 the request body is not an OpenLineage event")
        self.events.append(event)
        return _void(200)
