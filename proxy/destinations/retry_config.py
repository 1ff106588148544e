"""How patiently a failed delivery is retried, and when a failing target's circuit opens.

Pure configuration, apart from :mod:`proxy.destinations.retry` (which does the waiting),
so that config loading does not import asyncio's machinery.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from proxy.support.strict import StrictModel

__all__ = ["BreakerConfig", "RetryConfig"]


class RetryConfig(StrictModel):
    """How often and how patiently a failed delivery is tried again."""

    # Attempts in total before a retriable failure is given up, the first included; 1
    # means "never retry", null "until delivered". Proxy routes only: consumer daemons
    # and replay never give up on a retriable failure (see :meth:`until_delivered`).
    max_attempts: Annotated[int, Field(ge=1)] | None = 5
    # Cap of the wait before the first retry; it doubles after each failure, and each wait
    # is drawn at random below the cap (full jitter).
    initial_backoff_seconds: Annotated[float, Field(gt=0)] = 0.5
    # The backoff's cap: also how long a failing event may wait after its target is back.
    max_backoff_seconds: Annotated[float, Field(gt=0)] = 5.0
    # A target's Retry-After is honoured up to this many seconds.
    max_retry_after_seconds: Annotated[float, Field(ge=0)] = 300.0

    def until_delivered(self) -> RetryConfig:
        """The same backoff, never giving up on a retriable failure."""
        return self.model_copy(update={"max_attempts": None})


class BreakerConfig(StrictModel):
    """When a failing target's circuit opens, and how often it is probed while open."""

    # Retriable failures in a row that open the circuit: deliveries pause, one probe
    # goes out per probe interval, and nothing is dead-lettered while the target is down.
    threshold: Annotated[int, Field(ge=1)] = 5
    # The first probe interval; it doubles after each failed probe up to max_open_seconds,
    # which bounds how long a recovered target waits for traffic again.
    open_seconds: Annotated[float, Field(gt=0)] = 1.0
    # The longest probe interval.
    max_open_seconds: Annotated[float, Field(gt=0)] = 5.0

    @model_validator(mode="after")
    def _first_interval_within_the_cap(self) -> BreakerConfig:
        if self.open_seconds > self.max_open_seconds:
            raise ValueError("open_seconds must not exceed max_open_seconds")
        return self
