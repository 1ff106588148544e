"""OpenLineage events for a Spark application and its actions, built from plain facts.

Follows the official Spark integration's shape: one application job (jobType
APPLICATION, integration SPARK) with START and COMPLETE, and one job per reported action
(SQL_JOB, BATCH) with START and COMPLETE or FAIL whose ``parent`` facet points at the
application run (and ``root`` at the application's own parent when it has one, else at
the application run). Job names are ``<app>.<command>.<target>`` normalised like the
official ``NameNormalizer``. Pure: no JVM, no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from proxy import __version__
from proxy.openlineage.run_ids import uuid7
from spark_emitter.column_lineage import (
    ColumnLineage,
    InputColumn,
    Transformation,
    column_lineage,
    plan_output,
)
from spark_emitter.execution import ExecutionFacts, ReadFacts, WriteFacts
from spark_emitter.plan import Attribute, type_name

__all__ = [
    "PRODUCER",
    "AppContext",
    "JobRef",
    "action_events",
    "application_event",
    "is_reported",
    "normalize_name",
]

PRODUCER = f"https://github.com/lineage-proxy/lineage-proxy/tree/{__version__}/spark_emitter"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
_FACETS = "https://openlineage.io/spec/facets"
# Our one custom facet; its schema ships in the repository at this path and the proxy's
# validator registers it by default (proxy/validation/extra_schemas.py).
_SPARK_PROPERTIES_SCHEMA = (
    "https://github.com/lineage-proxy/lineage-proxy/blob/main/"
    "proxy/validation/schemas/SparkPropertiesFacet.json#/$defs/SparkPropertiesFacet"
)

# Executions Spark runs for display or internally (schema inference, show(), first()):
# reporting them as jobs would bury the real work. Writes are always reported.
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

    @property
    def application(self) -> JobRef:
        return JobRef(self.namespace, self.app_name, self.app_run_id)


def normalize_name(text: str) -> str:
    """``camelCase Words`` → ``camel_case_words``, as the official integration names jobs."""
    trimmed = re.sub(r"[^\w]+$", "", re.sub(r"^[^\w]+", "", text))
    plain = "".join(
        c for c in unicodedata.normalize("NFKD", trimmed) if not unicodedata.combining(c)
    )
    words = re.sub(r"([a-z])([A-Z])", r"\1 \2", plain)
    words = re.sub(r"(?<!^)([A-Z])([a-z])", r" \1\2", words)
    words = re.sub(r"(\d)(?=\D)", r"\1 ", words)
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


def _engine_facets(app: AppContext) -> dict[str, Any]:
    return {
        "processing_engine": _facet(
            "ProcessingEngineRunFacet",
            "1-1-1",
            version=app.spark_version,
            name="spark",
            openlineageAdapterVersion=__version__,
        ),
        "spark_properties": {
            "_producer": PRODUCER,
            "_schemaURL": _SPARK_PROPERTIES_SCHEMA,
            "properties": dict(app.spark_properties),
        },
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


def is_reported(facts: ExecutionFacts) -> bool:
    """Whether an execution is a job of its own (a write, or an action on real data)."""
    if facts.write is not None:
        return True
    if facts.action in NOISE_ACTIONS:
        return False
    return any(r.dataset is not None for r in facts.reads)


def _target_suffix(write: WriteFacts | None) -> str | None:
    """The official suffix: ``db_table`` for tables, the last two path parts for paths."""
    if write is None:
        return None
    if write.symlink is not None:
        return write.symlink[1].replace(".", "_")
    parts = write.dataset[1].rstrip("/").split("/")
    return "_".join(p for p in parts[-2:] if p)


def job_name(app: AppContext, facts: ExecutionFacts) -> str:
    """``<app>.<command>.<target>``, each part normalised."""
    name = f"{app.app_name}.{normalize_name(facts.command)}"
    suffix = _target_suffix(facts.write) if app.append_dataset_name else None
    return f"{name}.{normalize_name(suffix)}" if suffix else name


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


def _input_fields(columns: dict[InputColumn, set[Transformation]]) -> list[dict[str, Any]]:
    return [
        {
            "namespace": namespace,
            "name": name,
            "field": column,
            "transformations": [{"type": t, "subtype": s} for t, s in sorted(kinds)],
        }
        for (namespace, name, column), kinds in sorted(columns.items())
    ]


def _column_lineage_facet(lineage: ColumnLineage) -> dict[str, Any]:
    facet = _facet(
        "ColumnLineageDatasetFacet",
        "1-2-0",
        fields={
            name: {"inputFields": _input_fields(columns)}
            for name, columns in lineage.fields.items()
        },
    )
    if lineage.dataset:
        facet["dataset"] = _input_fields(lineage.dataset)
    return facet


def _inputs(facts: ExecutionFacts) -> list[dict[str, Any]]:
    leaves = [node for node in facts.query.walk() if not node.children] if facts.query else []
    seen: dict[tuple[str, str], dict[str, Any]] = {}

    def add(read: ReadFacts, attrs: list[Attribute]) -> None:
        if read.dataset is None or read.dataset in seen:
            return
        facets: dict[str, Any] = {"dataSource": _datasource(read.dataset[0])}
        if attrs:
            facets["schema"] = _schema_facet([(a.name, type_name(a.data_type)) for a in attrs])
        if read.symlink is not None:
            facets["symlinks"] = _symlinks(read.symlink)
        seen[read.dataset] = {
            "namespace": read.dataset[0],
            "name": read.dataset[1],
            "facets": facets,
        }

    for index, read in enumerate(facts.reads):
        add(read, plan_output(leaves[index]) if index < len(leaves) else [])
        for behind in read.cached_from:
            add(behind, [])
    return list(seen.values())


def _outputs(facts: ExecutionFacts, complete: bool) -> list[dict[str, Any]]:
    write = facts.write
    if write is None:
        return []
    facets: dict[str, Any] = {"dataSource": _datasource(write.dataset[0])}
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
        lineage = column_lineage(facts.query, [r.dataset for r in facts.reads], write.output_names)
        if lineage.fields or lineage.dataset:
            facets["columnLineage"] = _column_lineage_facet(lineage)
    if write.symlink is not None:
        facets["symlinks"] = _symlinks(write.symlink)
    if write.lifecycle is not None:
        facets["lifecycleStateChange"] = _facet(
            "LifecycleStateChangeDatasetFacet", "1-0-1", lifecycleStateChange=write.lifecycle
        )
    if complete and facts.rows is not None:
        statistics: dict[str, Any] = {"rowCount": facts.rows}
        if facts.bytes is not None:
            statistics["size"] = facts.bytes
        if facts.files is not None:
            statistics["fileCount"] = facts.files
        output_facets["outputStatistics"] = _facet(
            "OutputStatisticsOutputDatasetFacet", "1-0-2", **statistics
        )
    dataset: dict[str, Any] = {
        "namespace": write.dataset[0],
        "name": write.dataset[1],
        "facets": facets,
    }
    if output_facets:
        dataset["outputFacets"] = output_facets
    return [dataset]


def action_events(app: AppContext, facts: ExecutionFacts) -> list[dict[str, Any]]:
    """START and COMPLETE (or FAIL) of one action's run, parented to the application."""
    run_id = uuid7(facts.start_ms)
    job = (app.namespace, job_name(app, facts))
    job_facets = {"jobType": _job_type("SQL_JOB")}
    parent = _parent_facet(app.application, app.root or app.parent or app.application)
    inputs = _inputs(facts)
    start_facets = {"parent": parent, **_engine_facets(app)}
    start = _run_event(
        "START",
        facts.start_ms,
        run_id,
        job,
        start_facets,
        job_facets,
        inputs,
        _outputs(facts, complete=False),
    )
    end_facets: dict[str, Any] = {"parent": parent, **_engine_facets(app)}
    if facts.error is not None:
        end_facets["errorMessage"] = _facet(
            "ErrorMessageRunFacet",
            "1-0-1",
            message=facts.error,
            programmingLanguage="JAVA",
            **({"stackTrace": facts.stack_trace} if facts.stack_trace else {}),
        )
    end = _run_event(
        "FAIL" if facts.error is not None else "COMPLETE",
        facts.end_ms,
        run_id,
        job,
        end_facets,
        job_facets,
        inputs,
        _outputs(facts, complete=facts.error is None),
    )
    return [start, end]
