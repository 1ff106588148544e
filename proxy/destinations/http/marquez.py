"""Marquez: ``POST {url}/api/v1/lineage``; no auth, no batch, no idempotency.

Marquez answers 201 after the database write, 422 when a required field is null and 400
for a bad value — both permanent. Malformed JSON comes back as HTTP 500 whose body says
``{"code":400}``: that is the event's fault, so permanent too. Other 5xx are retriable.

Two events Marquez 0.50 answers with a 500 for ever, found before sending (issue 36):

- a JobEvent (no ``run``): Marquez stores its raw row, then fails on the missing run
  (``runUuid`` NullPointerException) — nothing useful is kept, and a retry stores another
  raw row. Refused (dead-lettered) with the reason; route JobEvents elsewhere by rule.
- a NUL character (``\\u0000``) in a string: PostgreSQL refuses it, Marquez stores
  nothing. Refused by default, as Marquez fed directly refuses it; ``nul_characters:
  strip`` removes the NULs and sends the rest.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import orjson

from proxy.destinations.http.target import CannotTake, HttpTarget, Verdict, judge_status
from proxy.openlineage import EventKind, event_kind
from proxy.openlineage.nul import has_nul, without_nul

__all__ = ["JOB_EVENTS", "NUL_CHARACTERS", "MarquezTarget"]

JOB_EVENTS = "marquez cannot take JobEvents (runUuid NPE in 0.50)"
NUL_CHARACTERS = (
    "marquez cannot take NUL characters (\\u0000) in strings: PostgreSQL refuses them "
    "(HTTP 500 in 0.50); nul_characters: strip removes them"
)


class MarquezTarget(HttpTarget):
    # Marquez: POST /api/v1/lineage, 201 on success.
    kind: Literal["marquez"]
    url: str = "http://localhost:5000"
    # An event with NUL characters (\u0000) in its strings, which Marquez refuses: dead_letter
    # it (as Marquez fed directly refuses it), or strip the NULs and send the rest.
    nul_characters: Literal["dead_letter", "strip"] = "dead_letter"

    reads_event: ClassVar[bool] = True  # a JobEvent is told by its shape

    def fitted(self, event: dict[str, Any], payload: bytes) -> bytes:
        if event_kind(event) is EventKind.JOB:
            raise CannotTake(JOB_EVENTS)
        if has_nul(payload):
            if self.nul_characters == "dead_letter":
                raise CannotTake(NUL_CHARACTERS)
            return without_nul(payload)
        return payload

    def endpoint(self) -> str:
        return f"{self.url}/api/v1/lineage"

    @property
    def order_sensitive(self) -> bool:
        # Which dataset version a run reads, a dataset's fields, a job's latest version and
        # the createdAt of namespaces and datasets all follow the order events arrive in.
        return True

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
