"""What one Spark SQL execution did, as plain data: read by :mod:`.plan_reader` from the
JVM, turned into OpenLineage events by :mod:`.events`.

Keeping this boundary plain (no py4j objects) is what lets the event builder be tested
without Spark and lets the listener hand facts to the builder after the JVM objects are
gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_emitter.plan import Node

__all__ = ["ExecutionFacts", "ReadFacts", "WriteFacts"]


@dataclass
class ReadFacts:
    """One leaf of the query plan: a dataset read, Spark's cache, or rows from elsewhere.

    ``reads`` of an execution line up with its plan's leaves in pre-order, which is how
    column lineage ties a leaf's columns to a dataset.
    """

    kind: str  # leaf node class, e.g. LogicalRelation, InMemoryRelation, LocalRelation
    dataset: tuple[str, str] | None = None  # (namespace, name)
    symlink: tuple[str, str] | None = None  # catalog table name, when read through a table
    data_source: str | None = None  # format: parquet, csv, jdbc, ...
    # For a cached relation (InMemoryRelation): the datasets that were read to fill it.
    cached_from: list[ReadFacts] = field(default_factory=list)
    # A read of several paths (a list of paths, a glob): the datasets after the first.
    more_datasets: list[tuple[str, str]] = field(default_factory=list)

    @property
    def datasets(self) -> list[tuple[str, str]]:
        """Every dataset this leaf reads: none, one, or one per root path."""
        return [self.dataset, *self.more_datasets] if self.dataset is not None else []

    @property
    def cached(self) -> bool:
        return self.kind == "InMemoryRelation"


@dataclass
class WriteFacts:
    """The target of a write or DDL command."""

    dataset: tuple[str, str]
    symlink: tuple[str, str] | None = None
    lifecycle: str | None = None  # CREATE, OVERWRITE, DROP, ...
    data_source: str | None = None
    output_names: list[str] | None = None
    partition_columns: list[str] = field(default_factory=list)
    # CREATE TABLE AS SELECT, saveAsTable and ALTER TABLE suffix their job with the table's
    # ``db_table``; everything else (inserts, CREATE / DROP / TRUNCATE TABLE, LOAD DATA)
    # with the last two parts of the written location, as the official integration does.
    job_named_by_table: bool = False
    # A write to a Kafka topic adds nothing to its job's name (the official integration's
    # Kafka writes do not either).
    job_suffixed: bool = True
    # (name, type) of a created table's columns, when no query defines them (CREATE TABLE).
    schema: list[tuple[str, str]] = field(default_factory=list)
    # A renamed table's dataset before the rename (the lifecycle facet's previousIdentifier).
    previous: tuple[str, str] | None = None


@dataclass
class ExecutionFacts:
    """One SQL execution: as planned when it started, or as seen when it ended."""

    execution_id: int
    action: str  # Spark's execution name: "command", "collect", "count", "head", ...
    command: str  # the executed plan's root node name, e.g. "Execute InsertInto..."
    start_ms: int
    end_ms: int
    query: Node | None  # optimized logical plan of what was read/computed
    # (name, type) of the query's output columns; the plan JSON lacks computed types.
    output_schema: list[tuple[str, str]] = field(default_factory=list)
    reads: list[ReadFacts] = field(default_factory=list)
    write: WriteFacts | None = None
    error: str | None = None
    stack_trace: str | None = None
    # The query failed in analysis (a missing path or table): no plan, only the error.
    analysis_failed: bool = False
    rows: int | None = None
    bytes: int | None = None
    files: int | None = None
    sql: str | None = None  # the SQL text the plan was parsed from (spark.sql), if any
