"""The HTTP target kinds: ``kind`` → model (a plain dict), and the config union over them."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from proxy.destinations.http.datahub import DataHubTarget
from proxy.destinations.http.destination import HttpDestination
from proxy.destinations.http.egeria import EgeriaTarget
from proxy.destinations.http.generic import GenericHttpTarget
from proxy.destinations.http.marquez import MarquezTarget
from proxy.destinations.http.target import HttpTarget
from proxy.destinations.retry import CircuitBreaker, OnRetry, RetryingDestination

__all__ = ["TARGETS", "HttpTargetConfig", "http_destination"]

TARGETS: dict[str, type[HttpTarget]] = {
    "http": GenericHttpTarget,
    "marquez": MarquezTarget,
    "egeria": EgeriaTarget,
    "datahub": DataHubTarget,
}

# What a config file names under ``target:`` for an HTTP target; ``kind`` picks the model.
HttpTargetConfig = Annotated[
    GenericHttpTarget | MarquezTarget | EgeriaTarget | DataHubTarget,
    Field(discriminator="kind"),
]


def http_destination(
    name: str,
    target: HttpTarget,
    *,
    breaker: CircuitBreaker | None = None,
    on_retry: OnRetry | None = None,
) -> RetryingDestination:
    """An HTTP destination for ``target`` that retries per ``target.retry``."""
    return RetryingDestination(
        HttpDestination(name, target), target.retry, breaker=breaker, on_retry=on_retry
    )
