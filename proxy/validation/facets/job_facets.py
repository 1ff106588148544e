"""Job facet models (spec facets whose base type is ``JobFacet``), with their registry rows.

LineageJobFacet lives in lineage_facets.py with its dataset twin.
"""

from __future__ import annotations

from typing import Annotated, Required

from pydantic import Field
from typing_extensions import TypedDict

from proxy.validation.facets.base import Container, JsonInt, SpecFacet, spec_object
from proxy.validation.formats import Uri

__all__ = ["JOB_FACETS"]


@spec_object
class EmissionPattern(TypedDict, total=False):
    eventTrigger: Required[str]
    eventContentMode: Required[str]
    windowDuration: Annotated[JsonInt, Field(ge=1)]


@spec_object
class JobTypeJobFacet(TypedDict, total=False):
    # emissionPattern arrived in 2-0-4 and is optional, so 1-0-0 … 2-0-3 bodies pass.
    processingType: Required[str]
    integration: Required[str]
    jobType: str
    emissionPattern: EmissionPattern


@spec_object
class SQLJobFacet(TypedDict, total=False):
    query: Required[str]
    dialect: str


@spec_object
class DocumentationJobFacet(TypedDict, total=False):
    description: Required[str]
    contentType: str


@spec_object
class SourceCodeJobFacet(TypedDict):
    language: str
    sourceCode: str


@spec_object
class SourceCodeLocationJobFacet(TypedDict, total=False):
    type: Required[str]
    url: Required[Uri]
    repoUrl: str
    path: str
    version: str
    tag: str
    branch: str
    pullRequestNumber: str


@spec_object
class Owner(TypedDict, total=False):
    name: Required[str]
    type: str


@spec_object
class OwnershipJobFacet(TypedDict, total=False):
    owners: list[Owner]


@spec_object
class JobTag(TypedDict, total=False):
    key: Required[str]
    value: Required[str]
    source: str


@spec_object
class TagsJobFacet(TypedDict, total=False):
    tags: list[JobTag]


JOB_FACETS = (
    SpecFacet("JobTypeJobFacet", "jobType", Container.JOB, JobTypeJobFacet),
    SpecFacet("SQLJobFacet", "sql", Container.JOB, SQLJobFacet),
    SpecFacet("DocumentationJobFacet", "documentation", Container.JOB, DocumentationJobFacet),
    SpecFacet("SourceCodeJobFacet", "sourceCode", Container.JOB, SourceCodeJobFacet),
    SpecFacet(
        "SourceCodeLocationJobFacet",
        "sourceCodeLocation",
        Container.JOB,
        SourceCodeLocationJobFacet,
    ),
    SpecFacet("OwnershipJobFacet", "ownership", Container.JOB, OwnershipJobFacet),
    SpecFacet("TagsJobFacet", "tags", Container.JOB, TagsJobFacet),
)
