"""Read what a Spark SQL execution did out of the JVM, through py4j, into plain facts.

Called from the listener at an execution's start (the running ``QueryExecution``, from
``SQLExecution.getQueryExecution``) and at its end (``SparkListenerSQLExecutionEnd``
carries it). The plan itself comes over as one JSON string
(:mod:`.plan`); py4j calls are made only for what that JSON leaves out — file paths,
table locations, JDBC URLs, write modes and the write's metrics — so a query costs a
handful of round trips, not one per node.

Every function here may raise (py4j errors, a Spark version without some method); the
listener guards the call as a whole.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from spark_emitter.dataset_naming import (
    jdbc_dataset,
    kafka_datasets,
    kafka_topics,
    path_dataset,
    table_symlink,
)
from spark_emitter.execution import ExecutionFacts, ReadFacts, WriteFacts
from spark_emitter.plan import Node, parse_tree, type_name

__all__ = [
    "CatalogContext",
    "read_execution",
    "read_finished_execution",
    "read_outcome",
    "read_started_execution",
]

# Commands that write a query's result: root class → (table accessor, lifecycle when the
# table is new). The query is reached with .query() on all of them.
_TABLE_WRITES = {
    "CreateDataSourceTableAsSelectCommand": "table",
    "SaveAsV1TableCommand": "tableDesc",
    "CreateHiveTableAsSelectCommand": "tableDesc",
    "OptimizedCreateHiveTableAsSelectCommand": "tableDesc",
}
_CREATE_TABLE = {"CreateDataSourceTableCommand": "table", "CreateTableCommand": "table"}


@dataclass(frozen=True)
class CatalogContext:
    """How to name tables in this session: metastore URI (Hive) or warehouse location."""

    session: Any  # the JVM SparkSession
    metastore_uri: str | None
    warehouse: str


def _option(value: Any) -> Any:
    return value.get() if value is not None and value.isDefined() else None


def _seq(value: Any) -> list[Any]:
    return [value.apply(i) for i in range(value.size())]


def _simple_name(obj: Any) -> str:
    return str(obj.getClass().getSimpleName()).rstrip("$")


def _table_location(table: Any, context: CatalogContext) -> str:
    location = _option(table.storage().locationUri())
    if location is None:
        location = context.session.sessionState().catalog().defaultTablePath(table.identifier())
    return str(location.toString())


def _table_names(table: Any, context: CatalogContext) -> tuple[tuple[str, str], tuple[str, str]]:
    """(location-named dataset, catalog symlink) of a CatalogTable."""
    identifier = table.identifier()
    database = _option(identifier.database())
    if database is None:
        database = context.session.sessionState().catalog().getCurrentDatabase()
    symlink = table_symlink(
        str(database),
        str(identifier.table()),
        context.metastore_uri,
        context.warehouse,
    )
    return path_dataset(_table_location(table, context)), symlink


def _read_relation(kind: str, relation: Any, table: Any, context: CatalogContext) -> ReadFacts:
    """A relation read by a logical leaf (LogicalRelation) or a physical scan."""
    if table is not None:
        dataset, symlink = _table_names(table, context)
        return ReadFacts(kind, dataset, symlink, str(_option(table.provider()) or "") or None)
    relation_kind = _simple_name(relation)
    if relation_kind == "HadoopFsRelation":
        datasets = _root_datasets(relation.location())
        source = str(relation.fileFormat().toString()).lower()
        first = datasets[0] if datasets else None
        return ReadFacts(kind, first, None, source, more_datasets=datasets[1:])
    if relation_kind == "JDBCRelation":
        options = relation.jdbcOptions()
        dataset = jdbc_dataset(str(options.url()), str(options.tableOrQuery()))
        return ReadFacts(kind, dataset, None, "jdbc")
    if relation_kind == "KafkaRelation":  # spark.read.format("kafka"), a batch read
        datasets = _kafka_datasets(_private_field(relation, "sourceOptions"))
        first = datasets[0] if datasets else None
        return ReadFacts(kind, first, None, "kafka", more_datasets=datasets[1:])
    return ReadFacts(kind)


def _private_field(obj: Any, name: str) -> Any:
    """A field the JVM object keeps to itself (a Scala constructor parameter), by reflection."""
    field = obj.getClass().getDeclaredField(name)
    field.setAccessible(True)
    return field.get(obj)


def _kafka_datasets(options: Any) -> list[tuple[str, str]]:
    """The topics a Kafka source or sink's options (a Scala map, case-insensitive) name, in
    the cluster its ``kafka.bootstrap.servers`` names."""
    keys = ("kafka.bootstrap.servers", "subscribe", "assign", "topic")
    given = {key: str(value) for key in keys if (value := _option(options.get(key))) is not None}
    servers = given.get("kafka.bootstrap.servers")
    if servers is None:
        return []
    topics = [given["topic"]] if "topic" in given else kafka_topics(given)
    return kafka_datasets(servers, topics)


def _root_datasets(index: Any) -> list[tuple[str, str]]:
    """The datasets a file index reads, as the official integration names them: its one root
    path (a file keeps its own name), or every root with a file standing for its directory.

    Whether a root is a file comes from the index's own listing (``leafFiles`` of an
    ``InMemoryFileIndex``), not from a file-system call; without it a root stays as it is.
    """
    roots = _seq(index.rootPaths())
    if len(roots) > 1:
        try:
            files = index.leafFiles()
            roots = [root.getParent() if files.contains(root) else root for root in roots]
        except Exception:  # another kind of index: keep the roots as given
            pass
    return list(dict.fromkeys(path_dataset(str(root.toString())) for root in roots))


def _read_leaf(leaf: Any, context: CatalogContext) -> ReadFacts:
    kind = _simple_name(leaf)
    if kind == "LogicalRelation":
        return _read_relation(kind, leaf.relation(), _option(leaf.catalogTable()), context)
    if kind == "HiveTableRelation":
        dataset, symlink = _table_names(leaf.tableMeta(), context)
        return ReadFacts(kind, dataset, symlink, "hive")
    if kind == "InMemoryRelation":
        return ReadFacts(kind, cached_from=_cached_sources(leaf, context))
    return ReadFacts(kind)


def _cached_sources(leaf: Any, context: CatalogContext) -> list[ReadFacts]:
    """The datasets read to fill a cached relation (it is read from memory now).

    Spark 4 keeps the cached query's logical plan; Spark 3.5 only its physical plan, whose
    file and JDBC scans carry the same relations.
    """
    builder = leaf.cacheBuilder()
    try:
        leaves = [
            _read_leaf(inner, context) for inner in _seq(builder.logicalPlan().collectLeaves())
        ]
    except Exception:  # Spark 3.5: no logicalPlan on the cache builder
        leaves = []
        for scan in _seq(builder.cachedPlan().collectLeaves()):
            kind = _simple_name(scan)
            if kind in ("FileSourceScanExec", "RowDataSourceScanExec"):
                table = _option(scan.tableIdentifier())
                catalog_table = (
                    context.session.sessionState().catalog().getTableMetadata(table)
                    if table is not None
                    else None
                )
                leaves.append(_read_relation(kind, scan.relation(), catalog_table, context))
    return [r for r in leaves if r.dataset is not None]


def _reads(query: Any, context: CatalogContext) -> list[ReadFacts]:
    return [_read_leaf(leaf, context) for leaf in _seq(query.collectLeaves())]


def _mode(command: Any) -> str:
    return str(command.mode().toString())


def _write(root: Any, root_node: Node, context: CatalogContext) -> tuple[Any, WriteFacts | None]:
    """The JVM query under a write command (or the plan itself) and the write's target."""
    kind = root_node.cls
    if kind == "InsertIntoHadoopFsRelationCommand":
        lifecycle = "OVERWRITE" if _mode(root) == "Overwrite" else None
        table = _option(root.catalogTable())
        dataset = path_dataset(str(root.outputPath().toString()))
        symlink = _table_names(table, context)[1] if table is not None else None
        names: list[str] | None = [str(n) for n in _seq(root.outputColumnNames())]
        partitions = [str(a.name()) for a in _seq(root.partitionColumns())]
        source: str | None = str(root.fileFormat().toString()).lower()
        return root.query(), WriteFacts(dataset, symlink, lifecycle, source, names, partitions)
    if kind in _TABLE_WRITES:
        table = getattr(root, _TABLE_WRITES[kind])()
        dataset, symlink = _table_names(table, context)
        # saveAsTable runs only to create its table (overwrite drops the old one first).
        overwrite = _mode(root) == "Overwrite" and kind != "SaveAsV1TableCommand"
        lifecycle = "OVERWRITE" if overwrite else "CREATE"
        # The query's own column names are the table's (SaveAsV1TableCommand has no
        # outputColumnNames).
        names = None
        partitions = [str(n) for n in _seq(table.partitionColumnNames())]
        source = str(_option(table.provider()) or "") or None
        write = WriteFacts(dataset, symlink, lifecycle, source, names, partitions, True)
        return root.query(), write
    if kind == "InsertIntoHiveTable":
        dataset, symlink = _table_names(root.table(), context)
        lifecycle = "OVERWRITE" if root.overwrite() else None
        names = [str(n) for n in _seq(root.outputColumnNames())]
        return root.query(), WriteFacts(dataset, symlink, lifecycle, "hive", names)
    if kind == "SaveIntoDataSourceCommand":
        options = root.options()
        url, table = _option(options.get("url")), _option(options.get("dbtable"))
        if url is not None and table is not None:
            lifecycle = "OVERWRITE" if _mode(root) == "Overwrite" else None
            dataset = jdbc_dataset(str(url), str(table))
            return root.query(), WriteFacts(dataset, None, lifecycle, "jdbc")
        if _simple_name(root.dataSource()) == "KafkaSourceProvider":
            # df.write.format("kafka") with a "topic" option: without one, each row names
            # its own topic (a "topic" column), which only the data tells.
            topics = _kafka_datasets(options)
            if topics:
                write = WriteFacts(topics[0], None, None, "kafka", job_suffixed=False)
                return root.query(), write
        return root.query(), None
    if kind in _DIRECTORY_WRITES:  # INSERT OVERWRITE [LOCAL] DIRECTORY
        dataset = path_dataset(str(_option(root.storage().locationUri()).toString()))
        lifecycle = "OVERWRITE" if root.overwrite() else None
        source = str(root.provider()) if kind == "InsertIntoDataSourceDirCommand" else "hive"
        return root.query(), WriteFacts(dataset, None, lifecycle, source)
    if kind == "LoadDataCommand":
        return None, _loaded_table(root, context)
    if kind in _CREATE_TABLE:
        table = getattr(root, _CREATE_TABLE[kind])()
        dataset, symlink = _table_names(table, context)
        # The new table's columns are its schema: there is no query to take them from.
        write = WriteFacts(dataset, symlink, "CREATE")
        write.schema = _schema(table)
        return None, write
    if kind in ("DropTable", "DropTableCommand"):
        return None, _dropped_table(root, kind, context)
    if kind in _TABLE_CHANGES:
        return None, _changed_table(root, kind, context)
    return root, None


# INSERT OVERWRITE DIRECTORY: ... USING <format>, and the Hive form (STORED AS, or USING hive).
_DIRECTORY_WRITES = frozenset({"InsertIntoDataSourceDirCommand", "InsertIntoHiveDirCommand"})


def _save_as_table_command(root: Any) -> str:
    """The job's command for ``saveAsTable``: the CREATE TABLE AS SELECT that Spark 4's
    ``SaveAsV1TableCommand`` runs as a nested execution — after dropping the table, in
    overwrite mode — which is the run the official integration names and gives the
    table to (its own run of ``SaveAsV1TableCommand`` has no output). Spark 3.5's
    ``saveAsTable`` plans that CREATE TABLE AS SELECT directly, so the job keeps its name
    across the upgrade. Hive tables (``format("hive")``) get Hive's form of the command."""
    provider = str(_option(root.tableDesc().provider()) or "").lower()
    if provider == "hive":
        return "Execute CreateHiveTableAsSelectCommand"
    return "Execute CreateDataSourceTableAsSelectCommand"


def _loaded_table(root: Any, context: CatalogContext) -> WriteFacts:
    """LOAD DATA [LOCAL] INPATH ... [OVERWRITE] INTO TABLE (Hive tables only): a write to the
    table. Like the official integration, the files loaded are not an input, and the job is
    named after the table's location."""
    table = context.session.sessionState().catalog().getTableMetadata(root.table())
    dataset, symlink = _table_names(table, context)
    write = WriteFacts(dataset, symlink, "OVERWRITE" if root.isOverwrite() else None, "hive")
    write.schema = _schema(table)
    return write


# Commands that change a catalog table in place: root class → (accessor of the table's
# identifier, lifecycle). The official integration reports the table as it is afterwards
# (after a rename, under its new name with the old one as ``previousIdentifier``; after
# ADD COLUMNS, with them), so these are read at the end only (see ``_END_ONLY``).
_TABLE_CHANGES = {
    "TruncateTableCommand": ("tableName", "TRUNCATE"),
    "AlterTableRenameCommand": ("newName", "RENAME"),
    "AlterTableAddColumnsCommand": ("table", None),
}
_END_ONLY = frozenset({"AlterTableRenameCommand", "AlterTableAddColumnsCommand"})


def _changed_table(root: Any, kind: str, context: CatalogContext) -> WriteFacts:
    accessor, lifecycle = _TABLE_CHANGES[kind]
    table = context.session.sessionState().catalog().getTableMetadata(getattr(root, accessor)())
    dataset, symlink = _table_names(table, context)
    # TRUNCATE is named after the table's location, as CREATE TABLE and DROP TABLE are.
    by_table = kind != "TruncateTableCommand"
    write = WriteFacts(dataset, symlink, lifecycle, job_named_by_table=by_table)
    write.schema = _schema(table)
    if kind == "AlterTableRenameCommand":
        old, new = str(root.oldName().table()), str(root.newName().table())
        write.previous = (dataset[0], dataset[1].replace(new, old))
    return write


def _dropped_table(root: Any, kind: str, context: CatalogContext) -> WriteFacts | None:
    if kind == "DropTableCommand":
        identifier = root.tableName()
        database, table = _option(identifier.database()), str(identifier.table())
    else:
        resolved = root.child()
        identifier = resolved.identifier()
        namespace = [str(n) for n in identifier.namespace()]
        database, table = (namespace[-1] if namespace else None), str(identifier.name())
    jvm_identifier = (
        context.session.sessionState()
        .sqlParser()
        .parseTableIdentifier(f"{database}.{table}" if database else table)
    )
    location = context.session.sessionState().catalog().defaultTablePath(jvm_identifier)
    symlink = table_symlink(database, table, context.metastore_uri, context.warehouse)
    location_dataset = path_dataset(str(location.toString()))
    return WriteFacts(location_dataset, symlink, "DROP")


def _write_metrics(executed: Any) -> tuple[int | None, int | None, int | None]:
    """(rows, bytes, files) written, from the write node of the executed plan."""
    node = executed
    for _ in range(6):
        kind = _simple_name(node)
        if kind == "AdaptiveSparkPlanExec":
            node = node.executedPlan()
            continue
        if kind.endswith("QueryStageExec"):  # Spark 4 wraps AQE's final plan in a stage
            node = node.plan()
            continue
        metrics = node.metrics()
        if metrics.contains("numOutputBytes"):
            rows, size, files = (
                _option(metrics.get(key)) for key in ("numOutputRows", "numOutputBytes", "numFiles")
            )
            return _metric(rows), _metric(size), _metric(files)
        children = node.children()
        if children.size() != 1:
            break
        node = children.apply(0)
    return None, None, None


def _schema(plan_or_table: Any) -> list[tuple[str, str]]:
    """(name, type) of the columns of a plan or a CatalogTable."""
    fields = json.loads(str(plan_or_table.schema().json())).get("fields", [])
    return [(str(f["name"]), type_name(f["type"])) for f in fields]


def _metric(metric: Any) -> int | None:
    return int(metric.value()) if metric is not None else None


def _command_name(executed: Any) -> str:
    """The executed plan's root node name, as the official integration names jobs.

    WholeStageCodegen says nothing, so it is unwrapped. Spark 4 also wraps write commands
    in AdaptiveSparkPlan where Spark 3.5 does not; unwrapping that when it holds a command
    keeps a write's job name the same on both (``execute_insert_into_...``).
    """
    kind = _simple_name(executed)
    if kind == "WholeStageCodegenExec":
        executed = executed.child()
    elif kind == "AdaptiveSparkPlanExec":
        inner = executed.inputPlan()
        if str(inner.nodeName()).startswith("Execute "):
            executed = inner
    return str(executed.nodeName())


def read_outcome(end_event: Any, jvm: Any) -> tuple[str | None, str | None]:
    """(error message, stack trace) of a failed execution; (None, None) if it succeeded."""
    failure = _option(end_event.executionFailure())
    if failure is None:
        # Spark reports success as an empty error message, not a missing one.
        message = _option(end_event.errorMessage())
        if not message:
            return None, None
        return str(message).split("\n", 1)[0], str(message)
    message = failure.getMessage()
    text = str(message) if message is not None else str(failure.toString())
    return text, str(jvm.org.apache.spark.util.Utils.exceptionString(failure))


def _sql_text(qe: Any) -> str | None:
    """The SQL text a plan was parsed from (``spark.sql``), which Catalyst keeps in each
    parsed node's origin (Spark 3.4+); None for DataFrame API actions.

    The analyser's rewrite of a CREATE TABLE (AS SELECT) or DROP TABLE into a V1 command
    drops the command's origin; a CTAS still has it on its query, a plain CREATE TABLE or
    DROP TABLE has it nowhere, so they carry no ``sql`` facet.
    """
    plan = qe.logical()
    candidates = [plan]
    with contextlib.suppress(Exception):  # only write commands have a query
        candidates.append(plan.query())
    for candidate in candidates:
        try:
            text = _option(candidate.origin().sqlText())
        except Exception:  # an older Spark without Origin.sqlText
            return None
        if text is not None:
            return str(text)
    return None


def _describe(facts: ExecutionFacts, qe: Any, plan: Any, context: CatalogContext) -> Any:
    """Fill ``facts`` with what ``plan`` (optimized or analysed) does; return the JVM
    executed plan (None if planning failed), where a write's metrics are read at the end."""
    root_node = parse_tree(json.loads(str(plan.toJSON())))
    query_jvm, facts.write = _write(plan, root_node, context)
    facts.sql = _sql_text(qe)
    if facts.write is not None and facts.write.schema:
        facts.output_schema = facts.write.schema
    try:
        executed = qe.executedPlan()
        facts.command = _command_name(executed)
    except Exception:  # planning failed: name the job after the logical plan
        executed, facts.command = None, f"Execute {root_node.cls}"
    if root_node.cls == "SaveAsV1TableCommand":
        facts.command = _save_as_table_command(plan)
    if query_jvm is not None:
        if isinstance(root_node.fields.get("query"), list):
            # A command that holds its query outside its children (CREATE TABLE AS SELECT,
            # saveAsTable, INSERT OVERWRITE DIRECTORY): the optimizer never saw it.
            query_jvm = _optimized(query_jvm, context)
            facts.query = parse_tree(json.loads(str(query_jvm.toJSON())))
        else:
            facts.query = _query_node(root_node)
        facts.output_schema = _schema(query_jvm)
        facts.reads = _reads(query_jvm, context)
    return executed


def _optimized(query: Any, context: CatalogContext) -> Any:
    """``query`` as Spark's optimizer rewrites it (the official integration reads column
    lineage from the optimized plan, so it includes the filters the optimizer infers, such
    as ``isnotnull`` and a join's conditions carried to the other side); as it is if that
    fails."""
    try:
        return context.session.sessionState().optimizer().execute(query)
    except Exception:
        return query


def read_started_execution(
    start_event: Any, context: CatalogContext, jvm: Any
) -> ExecutionFacts | None:
    """What the execution a ``SparkListenerSQLExecutionStart`` opens will do, from its
    ``QueryExecution`` — which Spark keeps registered only while the execution runs: None
    once it has ended (the listener bus lags behind), and for a query that failed in
    analysis. The action's name and outcome are known only at the end."""
    execution_id = int(start_event.executionId())
    qe = jvm.org.apache.spark.sql.execution.SQLExecution.getQueryExecution(execution_id)
    if qe is None:
        return None
    plan = _analysed_plan(qe)
    if plan is None:
        # Failed in analysis while still registered (the listener bus was quick): its
        # end reports it as a FAIL, with the error.
        return None
    if _simple_name(plan) in _END_ONLY:
        return None
    start_ms = int(start_event.time())
    facts = ExecutionFacts(execution_id, "unknown", "", start_ms, start_ms, None)
    _describe(facts, qe, plan, context)
    return facts


def read_finished_execution(end_event: Any, started: ExecutionFacts, jvm: Any) -> ExecutionFacts:
    """``started`` (read at the execution's start) completed by its end event: the action's
    name, the outcome, the end time and the write's metrics — the plan is not read again."""
    error, stack = read_outcome(end_event, jvm)
    rows = size = files = None
    qe = end_event.qe()
    if started.write is not None and qe is not None:
        rows, size, files = _write_metrics(qe.executedPlan())
    return dataclasses.replace(
        started,
        action=str(_option(end_event.executionName()) or "unknown"),
        end_ms=int(end_event.time()),
        error=error,
        stack_trace=stack,
        rows=rows,
        bytes=size,
        files=files,
    )


def _analysed_plan(qe: Any) -> Any | None:
    """The optimized plan, else the analysed one; None if the query failed in analysis
    (Spark 4 reports a query that failed there, e.g. reading a missing path, as an
    execution of its own whose ``QueryExecution`` raises the error again on every plan)."""
    try:
        return qe.optimizedPlan()
    except Exception:
        pass
    try:
        return qe.analyzed()
    except Exception:
        return None


def read_execution(
    end_event: Any, start_ms: int | None, context: CatalogContext, jvm: Any
) -> ExecutionFacts | None:
    """Facts of the execution that ``end_event`` (SparkListenerSQLExecutionEnd) closes."""
    qe = end_event.qe()
    if qe is None:
        return None
    error, stack = read_outcome(end_event, jvm)
    end_ms = int(end_event.time())
    duration_ms = int(end_event.duration()) // 1_000_000
    facts = ExecutionFacts(
        execution_id=int(end_event.executionId()),
        action=str(_option(end_event.executionName()) or "unknown"),
        command="",
        start_ms=start_ms if start_ms is not None else end_ms - duration_ms,
        end_ms=end_ms,
        query=None,
        error=error,
        stack_trace=stack,
    )
    plan = _analysed_plan(qe)
    if plan is None:
        if error is None:  # no plan and no error to explain it: nothing to describe
            return None
        # Named after what the parsed plan would have done, e.g. UnresolvedDataSource.
        facts.command = f"Execute {_simple_name(qe.logical())}"
        facts.analysis_failed = True
        return facts
    executed = _describe(facts, qe, plan, context)
    if facts.write is not None and executed is not None:
        facts.rows, facts.bytes, facts.files = _write_metrics(executed)
    return facts


def _query_node(root: Node) -> Node:
    """The part of the JSON plan that computes the data (under a write command, its query)."""
    return root.plan_field("query") or root
