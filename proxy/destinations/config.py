"""What every destination kind's configuration answers for itself.

A rules file's ``destinations:`` and a consumer's ``target:`` are read with the kinds'
models (:mod:`proxy.destinations.kinds` lists them; ``kind`` picks the class, and an
unknown kind or key is a load error with file and line). Each kind keeps its model beside
its runtime, in its own folder (``proxy/destinations/<kind>/config.py``), and the model
answers the questions asked of every kind — what a dry run shows for an event, its retry
policy, which module builds it live — so no caller keeps a chain of type checks and a new
kind is one folder plus one line in :mod:`proxy.destinations.kinds`.

Configuration stays pure: a model names the module that builds its destination instead of
importing it, so the rule language and config loading load neither aiohttp, librdkafka
nor the archive writer (an import contract in pyproject.toml holds them to it).

Every kind takes a retry policy (:class:`RetryConfig`; for ``http`` it sits in the
target): with one, :func:`~proxy.destinations.registry.build_destination` wraps the
destination in the retry loop and a circuit breaker. Routes leave it unset for kafka and
archive (the client retries); consumers always set it, never giving up.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

from proxy.destinations.retry_config import RetryConfig
from proxy.support.strict import StrictModel

__all__ = ["DestinationConfigBase", "DryRunDefaults"]


@dataclass(frozen=True, slots=True)
class DryRunDefaults:
    """What a dry run takes from config.yaml for destinations that leave it unset."""

    # kafka.topic: the topic of a kafka destination without one.
    topic: str
    # routing.archive_root: where a relative archive directory is placed.
    archive_root: Path


class DestinationConfigBase(StrictModel, abc.ABC):
    """The base of every kind's model; ``kind`` is narrowed to the kind's name."""

    # The module whose ``build(name, config, resources)`` makes the live destination
    # (see proxy/destinations/registry.py), named so that importing a config starts nothing.
    runtime: ClassVar[str]

    kind: str

    @abc.abstractmethod
    def retry_policy(self) -> RetryConfig | None:
        """The retry policy the registry wraps the destination in; None: no retry loop."""

    def with_retry_policy(self, retry: RetryConfig) -> Self:
        """This config with ``retry`` as its retry policy (``replay --max-attempts``)."""
        return self.model_copy(update={"retry": retry})

    @abc.abstractmethod
    def dry_run(self, event: dict[str, Any], defaults: DryRunDefaults) -> dict[str, Any]:
        """Where ``event`` would go (topic and key, directory, bucket, URL…), for
        ``lineage-proxy rules test`` and the dry-run output: plain JSON values."""
