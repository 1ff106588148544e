"""What every HTTP target shares: connection settings, auth, and the common status rules.

A target (generic HTTP, Marquez, Egeria, DataHub) is one pydantic model in its own module:
its settings plus its knowledge — :meth:`HttpTarget.endpoint` (the path),
:meth:`HttpTarget.judge` (success, retriable or permanent failure from status and body) and
:meth:`HttpTarget.fitted` (events it cannot take, known before sending).
Auth is shared here because Bearer and basic mean the same thing to every target.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from proxy.destinations.retry_config import RetryConfig
from proxy.support.secrets import check_one_source, secret_value
from proxy.support.strict import StrictModel

__all__ = [
    "ACCEPTED",
    "BasicAuth",
    "BearerAuth",
    "CannotTake",
    "HttpTarget",
    "Verdict",
    "judge_status",
]


@dataclass(frozen=True, slots=True)
class Verdict:
    """A target's answer, judged: accepted, or refused and whether trying again may help."""

    accepted: bool
    retriable: bool = False
    reason: str = ""


ACCEPTED = Verdict(True)


class CannotTake(Exception):
    """The target cannot take this event (:meth:`HttpTarget.fitted`); says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# Statuses that say "not now" rather than "never": overload, throttling, timeouts.
_RETRIABLE = {408, 425, 429}
# Statuses that say the *daemon* is misconfigured (token, URL), not that the event is bad:
# dead-lettering every event for them would empty the stream into the DLQ, so they are
# retried (the circuit breaker paces it) until an operator fixes the config.
_CONFIGURATION = {401, 403, 404, 405, 407}
# A lineage proxy's answer to an event that came round in a loop (proxy.destinations.hops).
_LOOP_DETECTED = 508


def judge_status(status: int) -> Verdict:
    """The rules every target starts from: 2xx accepted; 5xx, 408, 425, 429 retriable."""
    if status == _LOOP_DETECTED:
        # A proxy refused the event as one sent round in a loop: retrying cannot help.
        return Verdict(False, False, "HTTP 508: loop detected — the target sends events back")
    if 200 <= status < 300:
        return ACCEPTED
    if status >= 500 or status in _RETRIABLE:
        return Verdict(False, True, f"HTTP {status}")
    if status in _CONFIGURATION:
        return Verdict(False, True, f"HTTP {status}: check the target's URL and credentials")
    return Verdict(False, False, f"HTTP {status}")


class BearerAuth(StrictModel):
    # Authorization: Bearer <token>.
    type: Literal["bearer"]
    # The token itself, or the name of an environment variable holding it.
    token: SecretStr | None = None
    # Name of an environment variable holding the token (instead of token).
    token_env: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> BearerAuth:
        check_one_source("token or token_env", self.token, self.token_env)
        return self

    def header(self) -> str:
        return f"Bearer {secret_value(self.token, self.token_env)}"


class BasicAuth(StrictModel):
    # Authorization: Basic, from username and password.
    type: Literal["basic"]
    # The user name.
    username: str
    # The password itself...
    password: SecretStr | None = None
    # ... or the name of an environment variable holding it.
    password_env: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> BasicAuth:
        check_one_source("password or password_env", self.password, self.password_env)
        return self

    def header(self) -> str:
        password = secret_value(self.password, self.password_env)
        return "Basic " + base64.b64encode(f"{self.username}:{password}".encode()).decode()


class HttpTarget(StrictModel):
    """Settings every HTTP target has; subclasses add a ``kind`` and their knowledge."""

    # Whether :meth:`fitted` reads the event dict (else a consumer need not build it).
    reads_event: ClassVar[bool] = False

    # The target adapter: http (any endpoint), marquez, egeria or datahub.
    kind: str
    # Base URL of the target (the target's module appends its path), or for the generic
    # target the full endpoint URL.
    url: str
    # Extra request headers, sent as they are.
    headers: dict[str, str] = Field(default_factory=dict)
    # How to authenticate: type bearer or basic; null: no Authorization header.
    auth: Annotated[BearerAuth | BasicAuth, Field(discriminator="type")] | None = None
    # A request not answered within this long fails as retriable.
    timeout_seconds: Annotated[float, Field(gt=0)] = 10.0
    # Connections to the target at most (requests in flight beyond it wait).
    max_connections: Annotated[int, Field(ge=1)] = 64
    # Retry policy for retriable failures (5xx, timeouts, 429...).
    retry: RetryConfig = Field(default_factory=RetryConfig)
    # A URL that answers GET with 2xx only while the target can take events; null: the
    # target kind's own (marquez: its API's namespace list, which reads its database),
    # none for the others. Lets a consumer dead-letter an event the target keeps failing
    # while nothing else is delivered (docs/consumers/dlq.md).
    health_url: str | None = None

    @field_validator("url", "health_url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        if not url.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return url.rstrip("/")

    # Events per POST; above 1 the body is a JSON array. Only targets that take arrays
    # allow more than 1 (see GenericHttpTarget).
    @property
    def batch_max_events(self) -> int:
        return 1

    # Whether what the target shows depends on the order events arrive in, across runs:
    # then a consumer delivers in the order the proxy acknowledged them by default
    # (consumers/ordered.py). A consumer's ``ordering`` overrides it.
    @property
    def order_sensitive(self) -> bool:
        return False

    def endpoint(self) -> str:
        """The URL events are POSTed to."""
        return self.url

    def fitted(self, event: dict[str, Any], payload: bytes) -> bytes:
        """The payload to send for ``event``; raises :class:`CannotTake` for an event the
        target is known to fail on (it would answer a 5xx for ever). Targets refine it."""
        return payload

    def fails_for_good(self, event: dict[str, Any]) -> str | None:
        """Why a failed answer to ``event`` is final, for an event the target is known to
        fail on *after* it wrote part of it (as fed directly, once): sent once, its
        failure is not retried. None for every other event. Targets refine it."""
        return None

    def health_check(self) -> str | None:
        """The URL whose 2xx to a GET says the target is up, or None."""
        return self.health_url

    def request_headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **self.headers}
        if self.auth is not None:
            headers["Authorization"] = self.auth.header()
        return headers

    def judge(self, status: int, body: bytes) -> Verdict:
        """Tell success, retriable and permanent failure apart; targets refine this."""
        return judge_status(status)
