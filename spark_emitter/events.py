"""OpenLineage events for a Spark application and its actions, built from plain facts.

Follows the official Spark integration's shape: one application job (jobType
APPLICATION, integration SPARK) with START and COMPLETE, and one job per reported action
(SQL_JOB, BATCH) with START, RUNNING and COMPLETE or FAIL whose ``parent`` facet points at the
application run (and ``root`` at the application's own parent when it has one, else at
the application run). Job names are ``<app>.<command>.<target>`` built like the official
``JobNameBuilder``. Pure: no JVM, no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from spark_emitter.column_lineage import (
    ColumnLineage,
    InputColumn,
    Transformation,
    column_lineage,
    plan_output,
)
from spark_emitter.dataset_naming import DatasetName
from spark_emitter.dataset_trimming import trim_dataset_name
from spark_emitter.execution import ExecutionFacts, ReadFacts, WriteFacts
from spark_emitter.plan import Attribute, type_name
from spark_emitter.run_ids import uuid7
from spark_emitter.version import __version__

__all__ = [
    "PRODUCER",
    "ActionRun",
    "AppContext",
    "ApplicationDetails",
    "JobDetails",
    "JobRef",
    "TableCatalog",
    "action_event",
    "action_events",
    "action_run",
    "application_event",
    "end_type",
    "is_reported",
    "normalize_name",
]

PRODUCER = f"https://github.com/lineage-proxy/lineage-proxy/tree/{__version__}/spark_emitter"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
_FACETS = "https://openlineage.io/spec/facets"
_SUBSET_SCHEMA = f"{_FACETS}/1-0-0/BaseSubsetDatasetFacet.json"
_SUBSET_DEFS = {"input": "InputSubsetInputDatasetFacet", "output": "OutputSubsetOutputDatasetFacet"}
# Our custom facets' schemas ship in the repository under this path and the proxy's
# validator registers them by default (proxy/validation/extra_schemas.py).
_OWN_SCHEMAS = "https://github.com/lineage-proxy/lineage-proxy/blob/main/proxy/validation/schemas"

# Executions Spark runs for display or internally (schema inference, show(), first()):
# reporting them as jobs would bury the real work — even when read-only actions are
# reported. Writes are always reported.
NOISE_ACTIONS = frozenset(
    {"head", "show", "take", "tail", "first", "isEmpty", "rdd", "toLocalIterator", "unknown"}
)


@dataclass(frozen=True)
class JobRef:
    """A run of a job: what a ``parent``/``root`` facet points at."""

    namespace: str
    name: str
    run_id: str


@dataclass(frozen=True)
class ApplicationDetails:
    """The official ``spark_applicationDetails`` run facet's fields (on the application's
    START): who runs the application where, and where its UIs are."""

    master: str
    app_name: str  # as Spark has it, not normalised
    application_id: str
    deploy_mode: str
    user_name: str
    driver_host: str | None = None
    ui_web_url: str | None = None
    proxy_url: str | None = None
    history_url: str | None = None


@dataclass(frozen=True)
class JobDetails:
    """The official ``spark_jobDetails`` run facet's fields: the Spark job whose start an
    action's RUNNING event reports."""

    job_id: int
    description: str | None = None  # spark.job.description
    group: str | None = None  # spark.jobGroup.id
    call_site: str | None = None  # callSite.short


@dataclass(frozen=True)
class TableCatalog:
    """The catalog tables are named in, for the ``catalog`` dataset facet of a table."""

    name: str  # spark_catalog
    type: str  # spark.sql.catalogImplementation: hive or in-memory
    framework: str  # hive (a metastore) or spark (Spark's own in-memory catalog)
    metadata_uri: str | None = None  # the Hive metastore URI
    warehouse_uri: str | None = None


@dataclass(frozen=True)
class AppContext:
    """Everything about the application that every event repeats."""

    namespace: str
    app_name: str  # already normalised
    app_run_id: str
    spark_version: str
    spark_properties: dict[str, str] = field(default_factory=dict)
    parent: JobRef | None = None  # the scheduler's run that started this application
    root: JobRef | None = None
    append_dataset_name: bool = True
    report_read_only_actions: bool = False
    dataset_lineage: bool = True  # column lineage's indirect dependencies at dataset level
    details: ApplicationDetails | None = None
    catalog: TableCatalog | None = None

    @property
    def application(self) -> JobRef:
        return JobRef(self.namespace, self.app_name, self.app_run_id)


def normalize_name(text: str) -> str:
    """``camelCase Words`` → ``camel_case_words``, as the official ``NameNormalizer`` (1.41+).

    Ends trimmed of non-word characters, accents dropped, words split at a lower-case →
    upper-case change, before a capitalised word, and between a digit and an upper-case
    letter (``tbl1x`` stays, ``tbl1X`` → ``tbl1_x``, a UUID is left whole), then lower case
    with every run of other characters one ``_``. Like Java's, the classes are ASCII.
    """
    trimmed = re.sub(r"[^\w]+$", "", re.sub(r"^[^\w]+", "", text, flags=re.ASCII), flags=re.ASCII)
    plain = "".join(
        c
        for c in unicodedata.normalize("NFKD", trimmed)
        if not unicodedata.category(c).startswith("M")
    )
    words = re.sub(r"([a-z])([A-Z])", r"\1 \2", plain)
    words = re.sub(r"(?<!^)([A-Z])([a-z])", r" \1\2", words)
    words = re.sub(r"(\d)(?=[A-Z])", r"\1 ", words)
    return re.sub(r"[^a-zA-Z0-9]+", "_", words.lower())


def _time(ms: int) -> str:
    return (
        datetime.fromtimestamp(ms / 1000, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def _facet(facet_type: str, spec_version: str, /, **fields: Any) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": f"{_FACETS}/{spec_version}/{facet_type}.json#/$defs/{facet_type}",
        **fields,
    }


def _job_type(job_type: str) -> dict[str, Any]:
    return _facet(
        "JobTypeJobFacet", "2-0-4", processingType="BATCH", integration="SPARK", jobType=job_type
    )


def _ref(ref: JobRef) -> dict[str, Any]:
    return {"run": {"runId": ref.run_id}, "job": {"namespace": ref.namespace, "name": ref.name}}


def _parent_facet(parent: JobRef, root: JobRef) -> dict[str, Any]:
    return _facet("ParentRunFacet", "1-2-0", **_ref(parent), root=_ref(root))


def _own_facet(facet_type: str, /, **fields: Any) -> dict[str, Any]:
    """A facet of ours, its schema a file in this repository; fields that are None left out."""
    return {
        "_producer": PRODUCER,
        "_schemaURL": f"{_OWN_SCHEMAS}/{facet_type}.json#/$defs/{facet_type}",
        **{k: v for k, v in fields.items() if v is not None},
    }


def application_details_facet(details: ApplicationDetails) -> dict[str, Any]:
    """``spark_applicationDetails``, field names as the official integration's."""
    return _own_facet(
        "SparkApplicationDetailsFacet",
        master=details.master,
        appName=details.app_name,
        applicationId=details.application_id,
        deployMode=details.deploy_mode,
        driverHost=details.driver_host,
        userName=details.user_name,
        uiWebUrl=details.ui_web_url,
        proxyUrl=details.proxy_url,
        historyUrl=details.history_url,
    )


def job_details_facet(details: JobDetails) -> dict[str, Any]:
    """``spark_jobDetails``, field names as the official integration's."""
    return _own_facet(
        "SparkJobDetailsFacet",
        jobId=details.job_id,
        jobDescription=details.description,
        jobGroup=details.group,
        jobCallSite=details.call_site,
    )


def catalog_facet(catalog: TableCatalog) -> dict[str, Any]:
    """The standard ``catalog`` dataset facet of a table read or written through it."""
    facet = _facet(
        "CatalogDatasetFacet",
        "1-1-0",
        framework=catalog.framework,
        type=catalog.type,
        name=catalog.name,
        source="spark",
    )
    if catalog.metadata_uri is not None:
        facet["metadataUri"] = catalog.metadata_uri
    if catalog.warehouse_uri is not None:
        facet["warehouseUri"] = catalog.warehouse_uri
    return facet


def lifecycle_facet(change: str, previous: DatasetName | None = None) -> dict[str, Any]:
    """The standard ``lifecycleStateChange`` dataset facet; a RENAME names the dataset it
    was (``previousIdentifier``)."""
    facet = _facet("LifecycleStateChangeDatasetFacet", "1-0-1", lifecycleStateChange=change)
    if previous is not None:
        facet["previousIdentifier"] = {"namespace": previous[0], "name": previous[1]}
    return facet


def sql_facet(query: str) -> dict[str, Any]:
    """The standard ``sql`` job facet: the text given to ``spark.sql``."""
    return _facet("SQLJobFacet", "1-1-0", query=query, dialect="spark")


def _engine_facets(app: AppContext) -> dict[str, Any]:
    return {
        "processing_engine": _facet(
            "ProcessingEngineRunFacet",
            "1-1-1",
            version=app.spark_version,
            name="spark",
            openlineageAdapterVersion=__version__,
        ),
        "spark_properties": _own_facet(
            "SparkPropertiesFacet", properties=dict(app.spark_properties)
        ),
    }


def _run_event(
    event_type: str,
    time_ms: int,
    run_id: str,
    job: JobRef | tuple[str, str],
    run_facets: dict[str, Any],
    job_facets: dict[str, Any],
    inputs: list[dict[str, Any]] | None = None,
    outputs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    namespace, name = (job.namespace, job.name) if isinstance(job, JobRef) else job
    return {
        "eventType": event_type,
        "eventTime": _time(time_ms),
        "producer": PRODUCER,
        "schemaURL": SCHEMA_URL,
        "run": {"runId": run_id, "facets": run_facets},
        "job": {"namespace": namespace, "name": name, "facets": job_facets},
        "inputs": inputs or [],
        "outputs": outputs or [],
    }


def application_event(
    app: AppContext, event_type: str, time_ms: int, error: str | None = None
) -> dict[str, Any]:
    """START / COMPLETE / FAIL of the application run."""
    run_facets = _engine_facets(app)
    if event_type == "START" and app.details is not None:
        run_facets["spark_applicationDetails"] = application_details_facet(app.details)
    if app.parent is not None:
        run_facets["parent"] = _parent_facet(app.parent, app.root or app.parent)
    if error is not None:
        run_facets["errorMessage"] = _facet(
            "ErrorMessageRunFacet", "1-0-1", message=error, programmingLanguage="PYTHON"
        )
    return _run_event(
        event_type,
        time_ms,
        app.app_run_id,
        app.application,
        run_facets,
        {"jobType": _job_type("APPLICATION")},
    )


def is_reported(app: AppContext, facts: ExecutionFacts) -> bool:
    """Whether an execution is a job of its own: a write, DDL or drop; when
    ``report_read_only_actions`` is on, also an action that only reads real data
    (``count()``, ``collect()``) and a query that failed in analysis (reading a missing
    path: no plan, no output). The official integration filters plans with no output and
    sends nothing for an analysis failure, so by default neither is a job here: such a
    run has no dataset to tell it apart, and every analysis failure of the application
    would be one job (``<app>.execute_unresolved_data_source``)."""
    if facts.write is not None:
        return True
    if not app.report_read_only_actions:
        return False
    if facts.analysis_failed:
        return True
    if facts.action in NOISE_ACTIONS:
        return False
    return any(r.dataset is not None for r in facts.reads)


def _last_two_parts(name: str) -> str:
    """The official ``trimPath``: ``/wh/sales.db/orders`` → ``sales.db_orders``."""
    if name.rfind("/") <= 0:
        return name
    parts = name.split("/")
    while parts and not parts[-1]:  # Java's split drops trailing empty parts
        parts.pop()
    return "_".join(parts[-2:])


def _target_suffix(write: WriteFacts | None) -> str | None:
    """What the official integration appends: ``db_table`` when a table is created from a
    query or altered, else the last two parts of the written location with partitions
    trimmed."""
    if write is None or not write.job_suffixed:
        return None
    if write.job_named_by_table and write.symlink is not None:
        return write.symlink[1]
    return _last_two_parts(trim_dataset_name(write.dataset[1]))


def job_name(app: AppContext, facts: ExecutionFacts) -> str:
    """``<app>.<command>.<target>``: app and command normalised; the target only has its
    dots replaced, as the official ``JobNameBuilder`` does (case and ``-`` are kept)."""
    name = f"{app.app_name}.{normalize_name(facts.command)}"
    suffix = _target_suffix(facts.write) if app.append_dataset_name else None
    return f"{name}.{suffix.replace('.', '_')}" if suffix else name


def _schema_facet(fields: list[tuple[str, str]]) -> dict[str, Any]:
    return _facet("SchemaDatasetFacet", "1-2-0", fields=[{"name": n, "type": t} for n, t in fields])


def _datasource(namespace: str) -> dict[str, Any]:
    # The facet's uri must be a URI; the bare "file" namespace is not one.
    uri = namespace if ":" in namespace else f"{namespace}:///"
    return _facet("DatasourceDatasetFacet", "1-0-1", name=namespace, uri=uri)


def _symlinks(symlink: tuple[str, str]) -> dict[str, Any]:
    return _facet(
        "SymlinksDatasetFacet",
        "1-0-1",
        identifiers=[{"namespace": symlink[0], "name": symlink[1], "type": "TABLE"}],
    )


def _input_fields(columns: dict[InputColumn, list[Transformation]]) -> list[dict[str, Any]]:
    return [
        {
            "namespace": namespace,
            "name": name,
            "field": column,
            "transformations": [
                {"type": t.type, "subtype": t.subtype, "description": "", "masking": t.masking}
                for t in kinds
            ],
        }
        for (namespace, name, column), kinds in columns.items()
    ]


def _column_lineage_facet(lineage: ColumnLineage, dataset_level: bool) -> dict[str, Any] | None:
    """The ``columnLineage`` facet with the dataset-level dependencies as the facet's
    ``dataset`` list (``dataset_level``: the official integration's default, its
    ``datasetLineageEnabled`` option), or carried by every field (the older shape)."""
    fields = lineage.fields if dataset_level else lineage.fields_with_dataset_dependencies()
    dataset = lineage.dataset if dataset_level else {}
    if not fields and not dataset:
        return None
    facet = _facet(
        "ColumnLineageDatasetFacet",
        "1-2-0",
        fields={name: {"inputFields": _input_fields(columns)} for name, columns in fields.items()},
    )
    if dataset:
        facet["dataset"] = _input_fields(dataset)
    return facet


def _trimmed(dataset: DatasetName) -> DatasetName:
    return dataset[0], trim_dataset_name(dataset[1])


def _add_location(dataset: dict[str, Any], container: str, name: str) -> None:
    """Record a partition ``name`` that was trimmed into ``dataset`` in its ``subset`` facet
    (``LocationSubsetCondition``), where the official integration keeps them."""
    facets = dataset.setdefault(f"{container}Facets", {})
    subset = facets.setdefault(
        "subset",
        {
            "_producer": PRODUCER,
            "_schemaURL": f"{_SUBSET_SCHEMA}#/$defs/{_SUBSET_DEFS[container]}",
            f"{container}Condition": {"type": "location", "locations": []},
        },
    )
    locations = subset[f"{container}Condition"]["locations"]
    if name not in locations:
        locations.append(name)


def _table_facets(app: AppContext, symlink: tuple[str, str]) -> dict[str, Any]:
    """What a dataset read or written through a catalog table carries: the table's name
    (``symlinks``) and the catalog's (``catalog``)."""
    facets = {"symlinks": _symlinks(symlink)}
    if app.catalog is not None:
        facets["catalog"] = catalog_facet(app.catalog)
    return facets


def _inputs(app: AppContext, facts: ExecutionFacts) -> list[dict[str, Any]]:
    """One input per dataset read, partition directories trimmed and merged into it."""
    leaves = [node for node in facts.query.walk() if not node.children] if facts.query else []
    seen: dict[DatasetName, dict[str, Any]] = {}

    def add(read: ReadFacts, attrs: list[Attribute]) -> None:
        for dataset in read.datasets:
            name = _trimmed(dataset)
            if name not in seen:
                facets: dict[str, Any] = {"dataSource": _datasource(name[0])}
                if attrs:
                    fields = [(a.name, type_name(a.data_type)) for a in attrs]
                    facets["schema"] = _schema_facet(fields)
                if read.symlink is not None:
                    facets.update(_table_facets(app, read.symlink))
                seen[name] = {"namespace": name[0], "name": name[1], "facets": facets}
            if name != dataset:
                _add_location(seen[name], "input", dataset[1])

    for index, read in enumerate(facts.reads):
        add(read, plan_output(leaves[index]) if index < len(leaves) else [])
        for behind in read.cached_from:
            add(behind, [])
    return list(seen.values())


def _outputs(app: AppContext, facts: ExecutionFacts, complete: bool) -> list[dict[str, Any]]:
    write = facts.write
    if write is None:
        return []
    name = _trimmed(write.dataset)
    facets: dict[str, Any] = {"dataSource": _datasource(name[0])}
    output_facets: dict[str, Any] = {}
    if facts.output_schema:
        names = write.output_names or []
        if len(names) == len(facts.output_schema):
            facets["schema"] = _schema_facet(
                [(n, t) for n, (_, t) in zip(names, facts.output_schema, strict=True)]
            )
        else:
            facets["schema"] = _schema_facet(facts.output_schema)
    if facts.query is not None:
        read = [[_trimmed(d) for d in r.datasets] for r in facts.reads]
        lineage = column_lineage(facts.query, read, write.output_names)
        if facet := _column_lineage_facet(lineage, app.dataset_lineage):
            facets["columnLineage"] = facet
    if write.symlink is not None:
        facets.update(_table_facets(app, write.symlink))
    if write.lifecycle is not None:
        facets["lifecycleStateChange"] = lifecycle_facet(write.lifecycle, write.previous)
    if complete and facts.rows is not None:
        statistics: dict[str, Any] = {"rowCount": facts.rows}
        if facts.bytes is not None:
            statistics["size"] = facts.bytes
        if facts.files is not None:
            statistics["fileCount"] = facts.files
        output_facets["outputStatistics"] = _facet(
            "OutputStatisticsOutputDatasetFacet", "1-0-2", **statistics
        )
    dataset: dict[str, Any] = {"namespace": name[0], "name": name[1], "facets": facets}
    if output_facets:
        dataset["outputFacets"] = output_facets
    if name != write.dataset:
        _add_location(dataset, "output", write.dataset[1])
    return [dataset]


@dataclass(frozen=True)
class ActionRun:
    """One reported action's run. Its id and job name are fixed when it is first reported,
    so its START, RUNNING and COMPLETE/FAIL events agree even if the plan read at the end
    names the command differently."""

    run_id: str
    job_name: str


def action_run(app: AppContext, facts: ExecutionFacts) -> ActionRun:
    """A new run for the action ``facts`` describes, its id carrying the start time."""
    return ActionRun(uuid7(facts.start_ms), job_name(app, facts))


def end_type(facts: ExecutionFacts) -> str:
    return "FAIL" if facts.error is not None else "COMPLETE"


def action_event(
    app: AppContext,
    run: ActionRun,
    facts: ExecutionFacts,
    event_type: str,
    time_ms: int,
    job: JobDetails | None = None,
) -> dict[str, Any]:
    """One event of an action's run, parented to the application. The error goes on a
    FAIL, the written statistics on a COMPLETE, the Spark ``job`` whose start a RUNNING
    reports on that RUNNING; inputs, outputs and the SQL text are on every event."""
    parent = _parent_facet(app.application, app.root or app.parent or app.application)
    run_facets: dict[str, Any] = {"parent": parent, **_engine_facets(app)}
    if job is not None:
        run_facets["spark_jobDetails"] = job_details_facet(job)
    job_facets: dict[str, Any] = {"jobType": _job_type("SQL_JOB")}
    if facts.sql is not None:
        job_facets["sql"] = sql_facet(facts.sql)
    if event_type == "FAIL" and facts.error is not None:
        run_facets["errorMessage"] = _facet(
            "ErrorMessageRunFacet",
            "1-0-1",
            message=facts.error,
            programmingLanguage="JAVA",
            **({"stackTrace": facts.stack_trace} if facts.stack_trace else {}),
        )
    return _run_event(
        event_type,
        time_ms,
        run.run_id,
        (app.namespace, run.job_name),
        run_facets,
        job_facets,
        _inputs(app, facts),
        _outputs(app, facts, complete=event_type == "COMPLETE"),
    )


def action_events(app: AppContext, facts: ExecutionFacts) -> list[dict[str, Any]]:
    """START and COMPLETE (or FAIL) of an action first seen when it ended."""
    run = action_run(app, facts)
    return [
        action_event(app, run, facts, "START", facts.start_ms),
        action_event(app, run, facts, end_type(facts), facts.end_ms),
    ]
