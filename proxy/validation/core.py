"""The core OpenLineage event models (spec 2-0-2 ``OpenLineage.json``), facets excluded.

One model per event kind. Facet maps (``facets``, ``inputFacets``, ``outputFacets``) are
left out on purpose: the validator walks them itself, because which model a facet gets
depends on its ``_schemaURL``. Unknown properties are allowed at every level, as the
official schema allows them (it never says ``additionalProperties: false``).
"""

from __future__ import annotations

from typing import Literal, Required

from typing_extensions import TypedDict

from proxy.openlineage.kinds import EventKind
from proxy.validation.facets.base import spec_object
from proxy.validation.formats import DateTime, Uri, Uuid

__all__ = ["EVENT_MODELS", "DatasetEvent", "JobEvent", "RunEvent"]


@spec_object
class Run(TypedDict):
    runId: Uuid


@spec_object
class Job(TypedDict):
    namespace: str
    name: str


@spec_object
class Dataset(TypedDict):
    namespace: str
    name: str


@spec_object
class RunEvent(TypedDict, total=False):
    eventTime: Required[DateTime]
    producer: Required[Uri]
    schemaURL: Required[Uri]
    eventType: Literal["START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"]
    run: Required[Run]
    job: Required[Job]
    inputs: list[Dataset]
    outputs: list[Dataset]


@spec_object
class JobEvent(TypedDict, total=False):
    eventTime: Required[DateTime]
    producer: Required[Uri]
    schemaURL: Required[Uri]
    job: Required[Job]
    inputs: list[Dataset]
    outputs: list[Dataset]


@spec_object
class DatasetEvent(TypedDict):
    eventTime: DateTime
    producer: Uri
    schemaURL: Uri
    dataset: Dataset


EVENT_MODELS = {
    EventKind.RUN: RunEvent,
    EventKind.JOB: JobEvent,
    EventKind.DATASET: DatasetEvent,
}
