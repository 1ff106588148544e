"""DataHub: ``POST {url}/openapi/openlineage/api/v1/lineage`` on GMS with a Bearer token.

200 and 202 mean accepted; 400 means the event is invalid (permanent). Use ``auth:
{type: bearer, token_env: ...}`` with a DataHub personal access token.
"""

from __future__ import annotations

from typing import Literal

from proxy.destinations.http.target import HttpTarget, Verdict, judge_status

__all__ = ["DataHubTarget"]


class DataHubTarget(HttpTarget):
    # DataHub: POST /openapi/openlineage/api/v1/lineage.
    kind: Literal["datahub"]
    url: str = "http://localhost:8080"

    def endpoint(self) -> str:
        return f"{self.url}/openapi/openlineage/api/v1/lineage"

    def judge(self, status: int, body: bytes) -> Verdict:
        if status == 400:
            return Verdict(False, False, "DataHub refused the event as invalid (HTTP 400)")
        return judge_status(status)
