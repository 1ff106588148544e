"""Marquez: ``POST {url}/api/v1/lineage``; no auth, no batch, no idempotency.

Marquez answers 201 after the database write, 422 when a required field is null and 400
for a bad value — both permanent. Malformed JSON comes back as HTTP 500 whose body says
``{"code":400}``: that is the event's fault, so permanent too. Other 5xx are retriable.
"""

from __future__ import annotations

from typing import Literal

import orjson

from proxy.destinations.http.target import HttpTarget, Verdict, judge_status

__all__ = ["MarquezTarget"]


class MarquezTarget(HttpTarget):
    # Marquez: POST /api/v1/lineage, 201 on success.
    kind: Literal["marquez"]
    url: str = "http://localhost:5000"

    def endpoint(self) -> str:
        return f"{self.url}/api/v1/lineage"

    def health_check(self) -> str:
        # On the API port (the admin port's /healthcheck may not be reachable), and it
        # reads the database: a Marquez without its PostgreSQL fails it.
        return self.health_url or f"{self.url}/api/v1/namespaces?limit=1"

    def judge(self, status: int, body: bytes) -> Verdict:
        if status == 500 and _body_code(body) == 400:
            return Verdict(
                False, False, "Marquez refused the event: could not parse it (HTTP 500, code 400)"
            )
        if status in (400, 422):
            return Verdict(False, False, f"Marquez refused the event (HTTP {status})")
        return judge_status(status)


def _body_code(body: bytes) -> object:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return document.get("code") if isinstance(document, dict) else None
