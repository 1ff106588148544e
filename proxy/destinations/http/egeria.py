"""Egeria's lineage integrator (REST).

``POST {url}/servers/{server}/open-metadata/integration-services/lineage-integrator/``
``users/{user}/api/v1/lineage``.
Egeria answers HTTP 200 even when it failed: the real status is ``relatedHTTPCode`` in the
JSON body (with ``exceptionErrorMessage``). A ``relatedHTTPCode`` of 400 or more is a
failure, retriable or permanent by the same rules as an HTTP status of that value.

Egeria can also read our Kafka topics directly: its OpenLineage Kafka receiver takes one
raw OpenLineage JSON document per message, which is exactly what the proxy produces.
"""

from __future__ import annotations

from typing import Literal

import orjson

from proxy.destinations.http.target import ACCEPTED, HttpTarget, Verdict, judge_status

__all__ = ["EgeriaTarget"]


class EgeriaTarget(HttpTarget):
    # Egeria's lineage integrator; success is read from relatedHTTPCode in the body.
    kind: Literal["egeria"]
    url: str = "https://localhost:9443"
    # The integration daemon server hosting the lineage integrator, and the calling user.
    server: str = "integration-daemon"
    # The user the lineage integrator is called as (part of the endpoint path).
    user: str = "garygeeke"

    def endpoint(self) -> str:
        return (
            f"{self.url}/servers/{self.server}/open-metadata/integration-services/"
            f"lineage-integrator/users/{self.user}/api/v1/lineage"
        )

    def judge(self, status: int, body: bytes) -> Verdict:
        verdict = judge_status(status)
        if not verdict.accepted:
            return verdict
        try:
            document = orjson.loads(body) if body.strip() else {}
        except orjson.JSONDecodeError:
            return ACCEPTED  # a 200 without a JSON body carries no error
        code = document.get("relatedHTTPCode") if isinstance(document, dict) else None
        if not isinstance(code, int) or code < 400:
            return ACCEPTED
        # The real status, judged like any HTTP status (an unknown server is 404: a
        # configuration problem, retried, not a reason to dead-letter every event).
        related = judge_status(code)
        message = document.get("exceptionErrorMessage") or document.get("exceptionClassName")
        reason = f"Egeria relatedHTTPCode {code}" + (f": {message}" if message else "")
        return Verdict(False, related.retriable, reason)
