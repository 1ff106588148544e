"""LineageFacet.json: explicit lineage, as a dataset facet and as a job facet.

The spec keeps both in one file (and the file stem, ``LineageFacet``, names neither):
``LineageDatasetFacet`` for dataset facets, ``LineageJobFacet`` for job facets. Entries
and inputs are ``oneOf`` DATASET / JOB, told apart by their ``type`` constant.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Required

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError
from typing_extensions import TypedDict

from proxy.validation.facets.base import Container, SpecFacet, spec_object, tag, type_discriminator
from proxy.validation.formats import Uuid

__all__ = ["LINEAGE_FACETS"]


def _namespace_and_name_together(value: dict[str, Any]) -> dict[str, Any]:
    # dependentRequired: a job is named by both, or by neither (then: the event's own job).
    if ("namespace" in value) != ("name" in value):
        raise PydanticCustomError("dependent_required", "namespace and name go together")
    return value


@spec_object
class LineageTransformation(TypedDict, total=False):
    type: Required[str]
    subtype: str
    description: str
    masking: bool


@spec_object
class LineageDatasetInput(TypedDict, total=False):
    namespace: Required[str]
    name: Required[str]
    type: Required[Literal["DATASET"]]
    field: str
    transformations: list[LineageTransformation]


@spec_object
class LineageJobInput(TypedDict, total=False):
    namespace: str
    name: str
    type: Required[Literal["JOB"]]
    runId: Uuid
    transformations: list[LineageTransformation]


LineageInput = Annotated[
    Annotated[LineageDatasetInput, tag("DATASET")]
    | Annotated[
        Annotated[LineageJobInput, AfterValidator(_namespace_and_name_together)], tag("JOB")
    ],
    type_discriminator(),
]


@spec_object
class LineageFieldEntry(TypedDict):
    inputs: list[LineageInput]


@spec_object
class LineageDatasetEntry(TypedDict, total=False):
    namespace: Required[str]
    name: Required[str]
    type: Required[Literal["DATASET"]]
    inputs: list[LineageInput]
    fields: dict[str, LineageFieldEntry]


@spec_object
class LineageJobEntry(TypedDict, total=False):
    namespace: str
    name: str
    type: Required[Literal["JOB"]]
    runId: Uuid
    inputs: list[LineageInput]


LineageEntry = Annotated[
    Annotated[LineageDatasetEntry, tag("DATASET")]
    | Annotated[
        Annotated[LineageJobEntry, AfterValidator(_namespace_and_name_together)], tag("JOB")
    ],
    type_discriminator(),
]


@spec_object
class LineageDatasetFacet(TypedDict, total=False):
    inputs: list[LineageInput]
    fields: dict[str, LineageFieldEntry]


@spec_object
class LineageJobFacet(TypedDict):
    entries: list[LineageEntry]


LINEAGE_FACETS = (
    SpecFacet("LineageDatasetFacet", "lineage", Container.DATASET, LineageDatasetFacet),
    SpecFacet("LineageJobFacet", "lineage", Container.JOB, LineageJobFacet),
)
