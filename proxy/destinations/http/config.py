"""An ``http`` destination's configuration: one HTTP target (:mod:`.targets`) and whether
the client's answer waits for it."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from proxy.destinations.config import DestinationConfigBase, DryRunDefaults
from proxy.destinations.http.targets import HttpTargetConfig
from proxy.destinations.retry_config import RetryConfig

__all__ = ["HttpDestinationConfig"]


class HttpDestinationConfig(DestinationConfigBase):
    runtime: ClassVar[str] = "proxy.destinations.http.destination"

    # Destination kind: an HTTP target (Marquez, Egeria, DataHub or any endpoint).
    kind: Literal["http"]
    # The target adapter and its settings (url, headers, auth, timeout_seconds, retry):
    # kind http (generic), marquez, egeria or datahub — see proxy/destinations/http/.
    target: HttpTargetConfig
    # false: best effort, sent off the request path; true: the client's 2xx waits for
    # the target (keep its timeout and retries short, clients give up after ~5 s).
    required: bool = False

    def retry_policy(self) -> RetryConfig:
        """The target's retry policy (an HTTP target always has one)."""
        return self.target.retry

    def with_retry_policy(self, retry: RetryConfig) -> HttpDestinationConfig:
        return self.model_copy(update={"target": self.target.model_copy(update={"retry": retry})})

    def dry_run(self, event: dict[str, Any], defaults: DryRunDefaults) -> dict[str, Any]:
        return {"target": self.target.kind, "url": self.target.endpoint()}
