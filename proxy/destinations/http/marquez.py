"""Marquez: ``POST {url}/api/v1/lineage``; no auth, no batch, no idempotency.

Marquez answers 201 after the database write, 422 when a required field is null and 400
for a bad value — both permanent. Malformed JSON comes back as HTTP 500 whose body says
``{"code":400}``: that is the event's fault, so permanent too. Other 5xx are retriable.

Two events Marquez 0.50 answers with a 500 for ever, found before sending (issue 36):

- a JobEvent (no ``run``) with a dataset that carries ``inputFacets`` or ``outputFacets``
  — even empty, as openlineage-python always sends them: Marquez stores its raw row and
  its output datasets' versions, then fails on the missing run (``runUuid``
  NullPointerException), and each retry stores another raw row. It is sent **once**, as a
  client sending directly would, and its 500 is final (dead-lettered with the reason), so
  Marquez shows what it shows when fed directly; route such JobEvents elsewhere by rule to
  keep them. Other JobEvents Marquez takes (201: it creates the job and its datasets), and
  they are sent as any event (checked on the real Marquez 0.50.0).
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

JOB_EVENTS = (
    "marquez cannot take a JobEvent whose datasets carry inputFacets or outputFacets "
    "(runUuid NPE in 0.50)"
)
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
        if has_nul(payload):
            if self.nul_characters == "dead_letter":
                raise CannotTake(NUL_CHARACTERS)
            return without_nul(payload)
        return payload

    def fails_for_good(self, event: dict[str, Any]) -> str | None:
        if event_kind(event) is EventKind.JOB and _run_facets_on_datasets(event):
            return JOB_EVENTS
        return None

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


def _run_facets_on_datasets(event: dict[str, Any]) -> bool:
    """Whether an input carries ``inputFacets`` or an output ``outputFacets`` (Marquez
    files those under the event's run, which a JobEvent does not have)."""
    for side, key in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
        datasets = event.get(side)
        if isinstance(datasets, list) and any(isinstance(d, dict) and key in d for d in datasets):
            return True
    return False


def _body_code(body: bytes) -> object:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return document.get("code") if isinstance(document, dict) else None
