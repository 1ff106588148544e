"""Run facet models (spec facets whose base type is ``RunFacet``), with their registry rows."""

from __future__ import annotations

from typing import Any, Required

from typing_extensions import TypedDict

from proxy.validation.facets.base import Container, JsonInt, SpecFacet, forbid_extra, spec_object
from proxy.validation.formats import DateTime, Uri, Uuid

__all__ = ["RUN_FACETS"]


@spec_object
class BaseRunFacet(TypedDict, total=False):
    """A facet nested in another facet (e.g. parent.run.facets): only the base fields."""

    _producer: Required[Uri]
    _schemaURL: Required[Uri]


@spec_object
class BaseJobFacet(TypedDict, total=False):
    _producer: Required[Uri]
    _schemaURL: Required[Uri]
    _deleted: bool


# --- ParentRunFacet (1-2-0; "root" added in 1-1-0, optional, so 1-0-0 still validates)
@spec_object
class ParentRun(TypedDict, total=False):
    runId: Required[Uuid]
    facets: dict[str, BaseRunFacet]


@spec_object
class ParentJob(TypedDict, total=False):
    namespace: Required[str]
    name: Required[str]
    facets: dict[str, BaseJobFacet]


@spec_object
class ParentRoot(TypedDict):
    run: ParentRun
    job: ParentJob


@spec_object
class ParentRunFacet(TypedDict, total=False):
    run: Required[ParentRun]
    job: Required[ParentJob]
    root: ParentRoot


# --- small run facets
@spec_object
class NominalTimeRunFacet(TypedDict, total=False):
    nominalStartTime: Required[DateTime]
    nominalEndTime: DateTime


@spec_object
class ProcessingEngineRunFacet(TypedDict, total=False):
    version: Required[str]
    name: str
    openlineageAdapterVersion: str


@spec_object
class ErrorMessageRunFacet(TypedDict, total=False):
    message: Required[str]
    programmingLanguage: Required[str]
    stackTrace: str


@spec_object
class ExternalQueryRunFacet(TypedDict):
    externalQueryId: str
    source: str


@spec_object
class EnvironmentVariable(TypedDict):
    name: str
    value: str


@spec_object
class EnvironmentVariablesRunFacet(TypedDict):
    environmentVariables: list[EnvironmentVariable]


@forbid_extra
class ExecutionParameter(TypedDict, total=False):
    key: Required[str]
    name: str
    description: str
    value: str


@spec_object
class ExecutionParametersRunFacet(TypedDict, total=False):
    parameters: list[ExecutionParameter]


@spec_object
class ExtractionError(TypedDict, total=False):
    errorMessage: Required[str]
    stackTrace: str
    task: str
    taskNumber: JsonInt


@spec_object
class ExtractionErrorRunFacet(TypedDict):
    totalTasks: JsonInt
    failedTasks: JsonInt
    errors: list[ExtractionError]


# --- JobDependenciesRunFacet
@spec_object
class JobIdentifier(TypedDict):
    namespace: str
    name: str


@spec_object
class RunIdentifier(TypedDict):
    runId: Uuid


@spec_object
class JobDependency(TypedDict, total=False):
    job: Required[JobIdentifier]
    run: RunIdentifier
    dependency_type: str
    sequence_trigger_rule: str
    status_trigger_rule: str


@spec_object
class JobDependenciesRunFacet(TypedDict, total=False):
    upstream: list[JobDependency]
    downstream: list[JobDependency]
    trigger_rule: str


@spec_object
class RunTag(TypedDict, total=False):
    key: Required[str]
    value: Required[str]
    source: str


@spec_object
class TagsRunFacet(TypedDict, total=False):
    tags: list[RunTag]


@spec_object
class TestExecution(TypedDict, total=False):
    name: Required[str]
    status: Required[str]
    severity: str
    type: str
    description: str
    expected: str
    actual: str
    content: str
    contentType: str
    params: dict[str, Any]


@spec_object
class TestRunFacet(TypedDict):
    tests: list[TestExecution]


RUN_FACETS = (
    SpecFacet("ParentRunFacet", "parent", Container.RUN, ParentRunFacet),
    SpecFacet("NominalTimeRunFacet", "nominalTime", Container.RUN, NominalTimeRunFacet),
    SpecFacet(
        "ProcessingEngineRunFacet", "processing_engine", Container.RUN, ProcessingEngineRunFacet
    ),
    SpecFacet("ErrorMessageRunFacet", "errorMessage", Container.RUN, ErrorMessageRunFacet),
    SpecFacet("ExternalQueryRunFacet", "externalQuery", Container.RUN, ExternalQueryRunFacet),
    SpecFacet(
        "EnvironmentVariablesRunFacet",
        "environmentVariables",
        Container.RUN,
        EnvironmentVariablesRunFacet,
    ),
    SpecFacet(
        "ExecutionParametersRunFacet",
        "executionParameters",
        Container.RUN,
        ExecutionParametersRunFacet,
    ),
    SpecFacet("ExtractionErrorRunFacet", "extractionError", Container.RUN, ExtractionErrorRunFacet),
    SpecFacet("JobDependenciesRunFacet", "jobDependencies", Container.RUN, JobDependenciesRunFacet),
    SpecFacet("TagsRunFacet", "tags", Container.RUN, TagsRunFacet),
    SpecFacet("TestRunFacet", "test", Container.RUN, TestRunFacet),
)
