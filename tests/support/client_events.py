"""Events built by the real openlineage-python client, carrying every standard facet class.

The interop tests send these through the client's own transports; nothing here is
hand-written JSON. :func:`standard_facet_classes` lists every facet class the installed
client defines, so a client upgrade that adds one fails the coverage test until it is
added here.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import uuid
from datetime import UTC, datetime

import openlineage.client.generated as generated
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.generated import (
    base_subset_dataset as subset,
)
from openlineage.client.generated import (
    catalog_dataset,
    column_lineage_dataset,
    data_quality_assertions_dataset,
    data_quality_metrics_dataset,
    data_quality_metrics_input_dataset,
    dataset_type_dataset,
    dataset_version_dataset,
    datasource_dataset,
    documentation_dataset,
    documentation_job,
    environment_variables_run,
    error_message_run,
    execution_parameters_run,
    external_query_run,
    extraction_error_run,
    hierarchy_dataset,
    input_statistics_input_dataset,
    job_dependencies_run,
    job_type_job,
    lifecycle_state_change_dataset,
    lineage,
    nominal_time_run,
    output_statistics_output_dataset,
    ownership_dataset,
    ownership_job,
    parent_run,
    processing_engine_run,
    schema_dataset,
    source_code_job,
    source_code_location_job,
    sql_job,
    storage_dataset,
    symlinks_dataset,
    tags_dataset,
    tags_job,
    tags_run,
    test_run,
)
from openlineage.client.generated.base import (
    DatasetFacet,
    InputDatasetFacet,
    JobFacet,
    OutputDatasetFacet,
    RunFacet,
)

__all__ = ["PRODUCER", "every_facet_event", "standard_facet_classes"]

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"
_BASES = (RunFacet, JobFacet, DatasetFacet, InputDatasetFacet, OutputDatasetFacet)


def standard_facet_classes() -> set[type]:
    """Every facet class the installed openlineage-python defines (generated modules)."""
    found = set()
    for module_info in pkgutil.iter_modules(generated.__path__):
        module = importlib.import_module(f"{generated.__name__}.{module_info.name}")
        for cls in vars(module).values():
            if (
                inspect.isclass(cls)
                and cls.__module__ == module.__name__
                and issubclass(cls, _BASES)
                and cls not in _BASES
            ):
                found.add(cls)
    return found


def _dataset_facets(namespace: str, name: str, metastore: str) -> dict[str, DatasetFacet]:
    return {
        "catalog": catalog_dataset.CatalogDatasetFacet(
            framework="hive", type="hive", name="metastore", metadataUri="thrift://meta:9083"
        ),
        "columnLineage": column_lineage_dataset.ColumnLineageDatasetFacet(
            fields={
                "amount": column_lineage_dataset.Fields(
                    inputFields=[
                        column_lineage_dataset.InputField(
                            namespace=namespace,
                            name=name,
                            field="amount",
                            transformations=[
                                column_lineage_dataset.Transformation(
                                    type="DIRECT", subtype="IDENTITY"
                                )
                            ],
                        )
                    ]
                )
            }
        ),
        "dataQualityMetrics": data_quality_metrics_dataset.DataQualityMetricsDatasetFacet(
            columnMetrics={
                "amount": data_quality_metrics_dataset.ColumnMetrics(nullCount=0, min=1.0, max=9.5)
            },
            rowCount=10,
        ),
        "datasetType": dataset_type_dataset.DatasetTypeDatasetFacet(datasetType="TABLE"),
        "version": dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion="7"),
        "dataSource": datasource_dataset.DatasourceDatasetFacet(name=namespace, uri=namespace),
        "documentation": documentation_dataset.DocumentationDatasetFacet(description="orders"),
        "hierarchy": hierarchy_dataset.HierarchyDatasetFacet(
            hierarchy=[
                hierarchy_dataset.HierarchyDatasetFacetLevel(type="DATABASE", name="sales"),
                hierarchy_dataset.HierarchyDatasetFacetLevel(type="TABLE", name="orders"),
            ]
        ),
        "lifecycleStateChange": lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=lifecycle_state_change_dataset.LifecycleStateChange.RENAME,
            previousIdentifier=lifecycle_state_change_dataset.PreviousIdentifier(
                name="orders_old", namespace=namespace
            ),
        ),
        "lineage": lineage.LineageDatasetFacet(
            inputs=[
                lineage.LineageDatasetInput(
                    namespace=namespace,
                    name=name,
                    type="DATASET",
                    transformations=[lineage.LineageTransformation(type="DIRECT")],
                )
            ]
        ),
        "ownership": ownership_dataset.OwnershipDatasetFacet(
            owners=[ownership_dataset.Owner(name="team:sales", type="TEAM")]
        ),
        "schema": schema_dataset.SchemaDatasetFacet(
            fields=[
                schema_dataset.SchemaDatasetFacetFields(name="order_id", type="long"),
                schema_dataset.SchemaDatasetFacetFields(name="amount", type="decimal(10,2)"),
            ]
        ),
        "storage": storage_dataset.StorageDatasetFacet(
            storageLayer="iceberg", fileFormat="parquet"
        ),
        "symlinks": symlinks_dataset.SymlinksDatasetFacet(
            identifiers=[
                symlinks_dataset.Identifier(namespace=metastore, name="sales.orders", type="TABLE")
            ]
        ),
        "tags": tags_dataset.TagsDatasetFacet(
            tags=[tags_dataset.TagsDatasetFacetFields(key="pii", value="false", source="CONFIG")]
        ),
    }


def every_facet_event(
    *,
    event_time: str | None = None,
    event_type: RunState = RunState.COMPLETE,
    namespace: str = "airflow",
    name: str = "dag_x.task_y",
    hosts: str = "",
) -> RunEvent:
    """A RunEvent carrying one instance of every standard facet class of the client.
    ``hosts`` is appended to the datasets' host names: a test on a shared Marquez gives
    its datasets names no other test's events touch."""
    run_id = str(uuid.uuid4())
    source_ns, source_name = f"s3://raw-bucket{hosts}", "orders"
    metastore = f"hive://meta{hosts}:9083"
    condition = subset.LocationSubsetCondition(locations=[f"{source_ns}/orders/dt=1"])
    run_facets: dict[str, RunFacet] = {
        "environmentVariables": environment_variables_run.EnvironmentVariablesRunFacet(
            environmentVariables=[
                environment_variables_run.EnvironmentVariable(name="TZ", value="UTC")
            ]
        ),
        "errorMessage": error_message_run.ErrorMessageRunFacet(
            message="division by zero", programmingLanguage="python", stackTrace="Traceback…"
        ),
        "executionParameters": execution_parameters_run.ExecutionParametersRunFacet(
            parameters=[execution_parameters_run.ExecutionParameter(key="ds", value="2026-11-23")]
        ),
        "externalQuery": external_query_run.ExternalQueryRunFacet(
            externalQueryId="q-42", source="bigquery"
        ),
        "extractionError": extraction_error_run.ExtractionErrorRunFacet(
            totalTasks=2,
            failedTasks=1,
            errors=[extraction_error_run.Error(errorMessage="no parser", task="SELECT 1")],
        ),
        "jobDependencies": job_dependencies_run.JobDependenciesRunFacet(
            upstream=[
                job_dependencies_run.JobDependency(
                    job=job_dependencies_run.JobIdentifier(
                        namespace=namespace, name="dag_x.extract"
                    ),
                    run=job_dependencies_run.RunIdentifier(runId=str(uuid.uuid4())),
                )
            ]
        ),
        "nominalTime": nominal_time_run.NominalTimeRunFacet(
            nominalStartTime="2026-11-23T00:00:00Z", nominalEndTime="2026-11-24T00:00:00Z"
        ),
        "parent": parent_run.ParentRunFacet(
            run=parent_run.Run(runId=str(uuid.uuid4())),
            job=parent_run.Job(namespace=namespace, name="dag_x"),
            root=parent_run.Root(
                run=parent_run.RootRun(runId=str(uuid.uuid4())),
                job=parent_run.RootJob(namespace=namespace, name="dag_x"),
            ),
        ),
        "processing_engine": processing_engine_run.ProcessingEngineRunFacet(
            version="2.10.0", name="Airflow", openlineageAdapterVersion="1.54.0"
        ),
        "tags": tags_run.TagsRunFacet(tags=[tags_run.TagsRunFacetFields(key="env", value="prod")]),
        "test": test_run.TestRunFacet(
            tests=[test_run.TestExecution(name="not_null_order_id", status="pass")]
        ),
    }
    job_facets: dict[str, JobFacet] = {
        "documentation": documentation_job.DocumentationJobFacet(description="daily orders"),
        "jobType": job_type_job.JobTypeJobFacet(
            processingType="BATCH", integration="AIRFLOW", jobType="TASK"
        ),
        "lineage": lineage.LineageJobFacet(
            entries=[
                lineage.LineageDatasetEntry(
                    namespace=metastore,
                    name="sales.daily",
                    type="DATASET",
                    inputs=[
                        lineage.LineageDatasetInput(
                            namespace=source_ns, name=source_name, type="DATASET"
                        )
                    ],
                )
            ]
        ),
        "ownership": ownership_job.OwnershipJobFacet(
            owners=[ownership_job.Owner(name="team:sales")]
        ),
        "sourceCode": source_code_job.SourceCodeJobFacet(
            language="python", sourceCode="print('hi')"
        ),
        "sourceCodeLocation": source_code_location_job.SourceCodeLocationJobFacet(
            type="git", url="https://github.com/example/dags/blob/main/dag_x.py"
        ),
        "sql": sql_job.SQLJobFacet(query="INSERT INTO sales.daily SELECT * FROM orders"),
        "tags": tags_job.TagsJobFacet(tags=[tags_job.TagsJobFacetFields(key="tier", value="1")]),
    }
    inputs = [
        InputDataset(
            namespace=source_ns,
            name=source_name,
            facets=_dataset_facets(source_ns, source_name, metastore),
            inputFacets={
                "dataQualityAssertions": (
                    data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(
                        assertions=[
                            data_quality_assertions_dataset.Assertion(
                                assertion="not_null", success=True, column="order_id"
                            )
                        ]
                    )
                ),
                "dataQualityMetrics": (
                    data_quality_metrics_input_dataset.DataQualityMetricsInputDatasetFacet(
                        columnMetrics={
                            "amount": data_quality_metrics_input_dataset.ColumnMetrics(
                                distinctCount=4
                            )
                        },
                        rowCount=10,
                    )
                ),
                "inputStatistics": input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
                    rowCount=10, size=2048, fileCount=1
                ),
                "subset": subset.InputSubsetInputDatasetFacet(inputCondition=condition),
            },
        )
    ]
    outputs = [
        OutputDataset(
            namespace=metastore,
            name="sales.daily",
            facets={"schema": _dataset_facets(source_ns, source_name, metastore)["schema"]},
            outputFacets={
                "outputStatistics": (
                    output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                        rowCount=3, size=512
                    )
                ),
                "subset": subset.OutputSubsetOutputDatasetFacet(outputCondition=condition),
            },
        )
    ]
    return RunEvent(
        eventType=event_type,
        eventTime=event_time or datetime.now(UTC).isoformat(),
        run=Run(runId=run_id, facets=run_facets),
        job=Job(namespace=namespace, name=name, facets=job_facets),
        inputs=inputs,
        outputs=outputs,
        producer=PRODUCER,
    )
