"""A double of DataHub GMS's OpenLineage endpoint, reproducing its documented answers.

- ``POST /openapi/openlineage/api/v1/lineage`` with ``Authorization: Bearer <token>``;
- 401 when a token is required and missing or wrong;
- 200 on success (or 202 with ``accepted_status=202``), the event kept;
- 400 for an invalid event (not a JSON object, or without ``eventTime``/``producer``).
"""

from __future__ import annotations

import orjson
from aiohttp import web

from tests.support.doubles.target_double import TargetDouble

__all__ = ["DataHubDouble"]


class DataHubDouble(TargetDouble):
    path = "/openapi/openlineage/api/v1/lineage"

    def __init__(self, token: str | None = None, accepted_status: int = 200) -> None:
        super().__init__()
        self.token = token
        self.accepted_status = accepted_status

    async def answer(self, request: web.Request, body: bytes) -> web.Response:
        if self.token is not None and request.headers.get("Authorization") != (
            f"Bearer {self.token}"
        ):
            return web.json_response({"error": "Unauthorized"}, status=401)
        try:
            event = orjson.loads(body)
        except orjson.JSONDecodeError:
            event = None
        if not isinstance(event, dict) or not {"eventTime", "producer"} <= event.keys():
            return web.json_response({"error": "invalid OpenLineage event"}, status=400)
        self.events.append(event)
        return web.Response(status=self.accepted_status)
