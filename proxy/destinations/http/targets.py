"""The HTTP target kinds: ``kind`` → model (a plain dict), and the config union over them.

Pure configuration (no aiohttp): :mod:`proxy.destinations.config` builds on it."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from proxy.destinations.http.datahub import DataHubTarget
from proxy.destinations.http.egeria import EgeriaTarget
from proxy.destinations.http.generic import GenericHttpTarget
from proxy.destinations.http.marquez import MarquezTarget
from proxy.destinations.http.target import HttpTarget

__all__ = ["TARGETS", "HttpTargetConfig"]

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
