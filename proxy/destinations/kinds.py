"""The destination kinds, one line each: the registry a new kind is added to.

Each kind is a folder under ``proxy/destinations/`` with its model (``config.py``) and
the module its model names as ``runtime`` (``build(name, config, resources)``). The union
below is what rules files and consumer targets are read with, so a kind listed here is
accepted by ``rules check``, dry-run by ``rules test``, described by the configuration
reference and built by the proxy and the consumers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Union

from pydantic import Field

from proxy.destinations.archive.config import ArchiveDestinationConfig
from proxy.destinations.config import DestinationConfigBase
from proxy.destinations.http.config import HttpDestinationConfig
from proxy.destinations.kafka.config import KafkaDestinationConfig
from proxy.destinations.object_archive.config import ObjectArchiveDestinationConfig

__all__ = ["KINDS", "DestinationConfig"]

KINDS: tuple[type[DestinationConfigBase], ...] = (
    KafkaDestinationConfig,
    ArchiveDestinationConfig,
    ObjectArchiveDestinationConfig,
    HttpDestinationConfig,
)

if TYPE_CHECKING:
    # For the type checker every kind is a DestinationConfigBase; callers ask the model,
    # they do not narrow by class.
    DestinationConfig = DestinationConfigBase
else:
    DestinationConfig = Annotated[Union[KINDS], Field(discriminator="kind")]  # noqa: UP007
