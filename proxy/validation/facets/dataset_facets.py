"""Dataset, input-dataset and output-dataset facet models, with their registry rows.

Dataset facets (base ``DatasetFacet``) go under a dataset's ``facets``; input facets
(base ``InputDatasetFacet``) under ``inputFacets``; output facets under ``outputFacets``.
Note that ``DataQualityAssertionsDatasetFacet`` is, despite its name, an input facet.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Required

from typing_extensions import TypedDict

from proxy.validation.facets.base import (
    Container,
    JsonInt,
    SpecFacet,
    spec_object,
    tag,
    type_discriminator,
)
from proxy.validation.formats import DateTime, Uri

__all__ = ["DATASET_FACETS"]


# --- SchemaDatasetFacet (1-2-0 added nested "fields" and "ordinal_position", both optional)
@spec_object
class SchemaField(TypedDict, total=False):
    name: Required[str]
    type: str
    description: str
    ordinal_position: JsonInt
    fields: list[SchemaField]


@spec_object
class SchemaDatasetFacet(TypedDict, total=False):
    fields: list[SchemaField]


@spec_object
class DatasourceDatasetFacet(TypedDict, total=False):
    name: str
    uri: Uri


@spec_object
class DocumentationDatasetFacet(TypedDict, total=False):
    description: Required[str]
    contentType: str


@spec_object
class DatasetVersionDatasetFacet(TypedDict):
    datasetVersion: str


@spec_object
class DatasetTypeDatasetFacet(TypedDict, total=False):
    datasetType: Required[str]
    subType: str


@spec_object
class StorageDatasetFacet(TypedDict, total=False):
    storageLayer: Required[str]
    fileFormat: str


@spec_object
class SymlinkIdentifier(TypedDict):
    namespace: str
    name: str
    type: str


@spec_object
class SymlinksDatasetFacet(TypedDict, total=False):
    identifiers: list[SymlinkIdentifier]


@spec_object
class PreviousIdentifier(TypedDict):
    name: str
    namespace: str


@spec_object
class LifecycleStateChangeDatasetFacet(TypedDict, total=False):
    lifecycleStateChange: Required[
        Literal["ALTER", "CREATE", "DROP", "OVERWRITE", "RENAME", "TRUNCATE"]
    ]
    previousIdentifier: PreviousIdentifier


@spec_object
class Owner(TypedDict, total=False):
    name: Required[str]
    type: str


@spec_object
class OwnershipDatasetFacet(TypedDict, total=False):
    owners: list[Owner]


@spec_object
class DatasetTag(TypedDict, total=False):
    key: Required[str]
    value: Required[str]
    source: str
    field: str


@spec_object
class TagsDatasetFacet(TypedDict, total=False):
    tags: list[DatasetTag]


@spec_object
class HierarchyLevel(TypedDict):
    type: str
    name: str


@spec_object
class HierarchyDatasetFacet(TypedDict):
    hierarchy: list[HierarchyLevel]


@spec_object
class CatalogDatasetFacet(TypedDict, total=False):
    framework: Required[str]
    type: Required[str]
    name: Required[str]
    metadataUri: str
    warehouseUri: str
    source: str
    catalogProperties: dict[str, str]


# --- ColumnLineageDatasetFacet (1-2-0 added "transformations" and "dataset", optional;
# 1-0-0's transformationDescription / transformationType are kept, deprecated)
@spec_object
class ColumnTransformation(TypedDict, total=False):
    type: Required[str]
    subtype: str
    description: str
    masking: bool


@spec_object
class InputField(TypedDict, total=False):
    namespace: Required[str]
    name: Required[str]
    field: Required[str]
    transformations: list[ColumnTransformation]


@spec_object
class ColumnLineageField(TypedDict, total=False):
    inputFields: Required[list[InputField]]
    transformationDescription: str
    transformationType: str


@spec_object
class ColumnLineageDatasetFacet(TypedDict, total=False):
    fields: Required[dict[str, ColumnLineageField]]
    dataset: list[InputField]


# --- data quality
@spec_object
class ColumnMetrics(TypedDict, total=False):
    nullCount: JsonInt
    distinctCount: JsonInt
    sum: float
    count: float
    min: float
    max: float
    quantiles: dict[str, float]


@spec_object
class DataQualityMetricsDatasetFacet(TypedDict, total=False):
    rowCount: JsonInt
    bytes: JsonInt
    fileCount: JsonInt
    lastUpdated: DateTime
    columnMetrics: Required[dict[str, ColumnMetrics]]


@spec_object
class Assertion(TypedDict, total=False):
    assertion: Required[str]
    success: Required[bool]
    column: str
    severity: str
    name: str
    description: str
    expected: str
    actual: str
    content: str
    contentType: str
    params: dict[str, Any]


@spec_object
class DataQualityAssertionsDatasetFacet(TypedDict):
    assertions: list[Assertion]


# --- statistics
@spec_object
class InputStatisticsInputDatasetFacet(TypedDict, total=False):
    rowCount: JsonInt
    size: JsonInt
    fileCount: JsonInt


@spec_object
class OutputStatisticsOutputDatasetFacet(TypedDict, total=False):
    rowCount: JsonInt
    size: JsonInt
    fileCount: JsonInt


# --- BaseSubsetDatasetFacet: a recursive condition tree, oneOf by "type" constant
@spec_object
class LocationSubsetCondition(TypedDict):
    type: Literal["location"]
    locations: list[str]


@spec_object
class Partition(TypedDict, total=False):
    identifier: str
    dimensions: Required[dict[str, Any]]


@spec_object
class PartitionSubsetCondition(TypedDict):
    type: Literal["partition"]
    partitions: list[Partition]


@spec_object
class FieldCompareExpression(TypedDict):
    type: Literal["field"]
    field: str


@spec_object
class LiteralCompareExpression(TypedDict):
    type: Literal["literal"]
    value: str


CompareExpression = Annotated[
    Annotated[FieldCompareExpression, tag("field")]
    | Annotated[LiteralCompareExpression, tag("literal")],
    type_discriminator(),
]


@spec_object
class CompareSubsetCondition(TypedDict):
    type: Literal["compare"]
    left: CompareExpression
    right: CompareExpression
    comparison: str


@spec_object
class BinarySubsetCondition(TypedDict):
    type: Literal["binary"]
    left: SubsetCondition
    right: SubsetCondition
    operator: str


SubsetCondition = Annotated[
    Annotated[LocationSubsetCondition, tag("location")]
    | Annotated[PartitionSubsetCondition, tag("partition")]
    | Annotated[BinarySubsetCondition, tag("binary")]
    | Annotated[CompareSubsetCondition, tag("compare")],
    type_discriminator(),
]


@spec_object
class InputSubsetInputDatasetFacet(TypedDict):
    inputCondition: SubsetCondition


@spec_object
class OutputSubsetOutputDatasetFacet(TypedDict):
    outputCondition: SubsetCondition


DATASET_FACETS = (
    SpecFacet("SchemaDatasetFacet", "schema", Container.DATASET, SchemaDatasetFacet),
    SpecFacet("DatasourceDatasetFacet", "dataSource", Container.DATASET, DatasourceDatasetFacet),
    SpecFacet(
        "DocumentationDatasetFacet", "documentation", Container.DATASET, DocumentationDatasetFacet
    ),
    SpecFacet(
        "DatasetVersionDatasetFacet", "version", Container.DATASET, DatasetVersionDatasetFacet
    ),
    SpecFacet("DatasetTypeDatasetFacet", "datasetType", Container.DATASET, DatasetTypeDatasetFacet),
    SpecFacet("StorageDatasetFacet", "storage", Container.DATASET, StorageDatasetFacet),
    SpecFacet("SymlinksDatasetFacet", "symlinks", Container.DATASET, SymlinksDatasetFacet),
    SpecFacet(
        "LifecycleStateChangeDatasetFacet",
        "lifecycleStateChange",
        Container.DATASET,
        LifecycleStateChangeDatasetFacet,
    ),
    SpecFacet("OwnershipDatasetFacet", "ownership", Container.DATASET, OwnershipDatasetFacet),
    SpecFacet("TagsDatasetFacet", "tags", Container.DATASET, TagsDatasetFacet),
    SpecFacet("HierarchyDatasetFacet", "hierarchy", Container.DATASET, HierarchyDatasetFacet),
    SpecFacet("CatalogDatasetFacet", "catalog", Container.DATASET, CatalogDatasetFacet),
    SpecFacet(
        "ColumnLineageDatasetFacet", "columnLineage", Container.DATASET, ColumnLineageDatasetFacet
    ),
    SpecFacet(
        "DataQualityMetricsDatasetFacet",
        "dataQualityMetrics",
        Container.DATASET,
        DataQualityMetricsDatasetFacet,
    ),
    SpecFacet(
        "DataQualityMetricsInputDatasetFacet",
        "dataQualityMetrics",
        Container.INPUT,
        DataQualityMetricsDatasetFacet,  # same body; only the container differs
    ),
    SpecFacet(
        "DataQualityAssertionsDatasetFacet",
        "dataQualityAssertions",
        Container.INPUT,
        DataQualityAssertionsDatasetFacet,
    ),
    SpecFacet(
        "InputStatisticsInputDatasetFacet",
        "inputStatistics",
        Container.INPUT,
        InputStatisticsInputDatasetFacet,
    ),
    SpecFacet(
        "InputSubsetInputDatasetFacet", "subset", Container.INPUT, InputSubsetInputDatasetFacet
    ),
    SpecFacet(
        "OutputStatisticsOutputDatasetFacet",
        "outputStatistics",
        Container.OUTPUT,
        OutputStatisticsOutputDatasetFacet,
    ),
    SpecFacet(
        "OutputSubsetOutputDatasetFacet", "subset", Container.OUTPUT, OutputSubsetOutputDatasetFacet
    ),
)
