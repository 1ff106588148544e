"""The spec's facets: one model per facet definition and a registry keyed by facet name.

Facets are keyed by NAME (the ``$defs`` fragment or the schema file's stem), never by
version: ``…/facets/1-0-0/SchemaDatasetFacet.json`` and ``…/1-2-0/…`` are one facet,
and the models are lenient enough (later additions optional) for older bodies to pass.
Two spec files hold two definitions under a stem that names neither; ``FILE_STEMS``
says which definition a container means.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from pydantic import TypeAdapter

from proxy.validation.facets.base import Container, SpecFacet
from proxy.validation.facets.dataset_facets import DATASET_FACETS
from proxy.validation.facets.job_facets import JOB_FACETS
from proxy.validation.facets.lineage_facets import LINEAGE_FACETS
from proxy.validation.facets.run_facets import RUN_FACETS

__all__ = ["ALL_SPEC_FACETS", "FILE_STEMS", "CompiledFacet", "Container", "SpecRegistry"]

ALL_SPEC_FACETS: tuple[SpecFacet, ...] = (
    *RUN_FACETS,
    *JOB_FACETS,
    *DATASET_FACETS,
    *LINEAGE_FACETS,
)

FILE_STEMS: dict[str, dict[Container, str]] = {
    "BaseSubsetDatasetFacet": {
        Container.INPUT: "InputSubsetInputDatasetFacet",
        Container.OUTPUT: "OutputSubsetOutputDatasetFacet",
    },
    "LineageFacet": {
        Container.DATASET: "LineageDatasetFacet",
        Container.JOB: "LineageJobFacet",
    },
}


class CompiledFacet(NamedTuple):
    name: str
    key: str
    container: Container
    adapter: TypeAdapter[Any]


class SpecRegistry:
    """Every spec facet compiled once; lookups by name and by conventional key."""

    def __init__(self) -> None:
        self.by_name: dict[str, CompiledFacet] = {
            facet.name: CompiledFacet(
                facet.name, facet.key, facet.container, TypeAdapter(facet.model)
            )
            for facet in ALL_SPEC_FACETS
        }
        self.by_key: dict[tuple[Container, str], CompiledFacet] = {
            (facet.container, facet.key): facet for facet in self.by_name.values()
        }

    def names(self) -> frozenset[str]:
        """Facet definition names, plus the file stems that stand for one (LineageFacet)."""
        return frozenset(self.by_name) | frozenset(FILE_STEMS)

    def by_schema_name(self, name: str, container: Container) -> CompiledFacet | None:
        """The facet a ``_schemaURL`` name (fragment or file stem) means in ``container``."""
        facet = self.by_name.get(name)
        if facet is not None:
            return facet
        members = FILE_STEMS.get(name)
        if members is None:
            return None
        chosen = members.get(container) or next(iter(members.values()))
        return self.by_name[chosen]
