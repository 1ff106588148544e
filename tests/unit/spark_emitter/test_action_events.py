"""The events of one action's run, built from plain facts: what each of START, RUNNING,
COMPLETE and FAIL carries, and that they all name one run and one job."""

from __future__ import annotations

import dataclasses

from proxy.validation import EventValidator
from spark_emitter.events import (
    AppContext,
    TableCatalog,
    action_event,
    action_run,
    end_type,
    is_reported,
)
from spark_emitter.execution import ExecutionFacts, ReadFacts, WriteFacts
from spark_emitter.plan import parse_tree
from spark_emitter.run_ids import uuid7

APP = AppContext(namespace="ns", app_name="etl", app_run_id=uuid7(), spark_version="4.0")
VALIDATOR = EventValidator(strict=True)
PLANNED = ExecutionFacts(
    7,
    "unknown",
    "Execute InsertIntoHadoopFsRelationCommand",
    1_000,
    1_000,
    None,
    output_schema=[("id", "bigint")],
    reads=[ReadFacts("LogicalRelation", ("file", "/in/orders"))],
    write=WriteFacts(("file", "/out/daily"), output_names=["id"]),
)


def test_start_running_and_complete_share_the_run_and_only_complete_has_statistics() -> None:
    run = action_run(APP, PLANNED)
    ended = dataclasses.replace(PLANNED, action="command", end_ms=9_000, rows=3, bytes=10)
    events = [
        action_event(APP, run, PLANNED, "START", PLANNED.start_ms),
        action_event(APP, run, PLANNED, "RUNNING", 5_000),
        action_event(APP, run, ended, end_type(ended), ended.end_ms),
    ]
    assert [e["eventType"] for e in events] == ["START", "RUNNING", "COMPLETE"]
    assert [VALIDATOR.validate(e) for e in events] == [[], [], []]
    assert {e["run"]["runId"] for e in events} == {run.run_id}
    job = "etl.execute_insert_into_hadoop_fs_relation_command.out_daily"
    assert {e["job"]["name"] for e in events} == {job}
    for event in events:
        assert [i["name"] for i in event["inputs"]] == ["/in/orders"]
        schema = event["outputs"][0]["facets"]["schema"]
        assert schema["fields"] == [{"name": "id", "type": "bigint"}]
    assert ["outputFacets" in e["outputs"][0] for e in events] == [False, False, True]


def test_a_query_that_failed_in_analysis_is_a_fail_with_the_error_and_its_stack() -> None:
    # Reported only when read-only actions are (the official integration sends nothing).
    reporting = dataclasses.replace(APP, report_read_only_actions=True)
    failed = ExecutionFacts(
        3,
        "analyze",
        "Execute UnresolvedDataSource",
        1_000,
        1_200,
        None,
        error="[PATH_NOT_FOUND] Path does not exist: file:/in/missing.",
        stack_trace="org.apache.spark.sql.AnalysisException: [PATH_NOT_FOUND] ...",
        analysis_failed=True,
    )
    assert not is_reported(APP, failed)
    assert is_reported(reporting, failed)  # though nothing is known to be written
    fail = action_event(
        reporting, action_run(reporting, failed), failed, end_type(failed), failed.end_ms
    )
    assert VALIDATOR.validate(fail) == []
    assert fail["eventType"] == "FAIL"
    assert fail["job"]["name"] == "etl.execute_unresolved_data_source"
    error = fail["run"]["facets"]["errorMessage"]
    assert (error["message"], error["programmingLanguage"]) == (failed.error, "JAVA")
    assert error["stackTrace"] == failed.stack_trace


CATALOG = TableCatalog("spark_catalog", "in-memory", "spark", warehouse_uri="file:/wh")


def test_a_table_read_and_written_carries_the_standard_catalog_facet() -> None:
    app = dataclasses.replace(APP, catalog=CATALOG)
    facts = dataclasses.replace(
        PLANNED,
        reads=[
            ReadFacts("LogicalRelation", ("file", "/wh/orders"), ("file:/wh", "default.orders"))
        ],
        write=WriteFacts(("file", "/wh/daily"), ("file:/wh", "default.daily"), output_names=["id"]),
    )
    event = action_event(app, action_run(app, facts), facts, "START", 1_000)
    assert VALIDATOR.validate(event) == []
    for dataset in (event["inputs"][0], event["outputs"][0]):
        catalog = dataset["facets"]["catalog"]
        assert catalog["_schemaURL"].endswith(
            "/1-1-0/CatalogDatasetFacet.json#/$defs/CatalogDatasetFacet"
        )
        assert {k: v for k, v in catalog.items() if not k.startswith("_")} == {
            "framework": "spark",
            "type": "in-memory",
            "name": "spark_catalog",
            "warehouseUri": "file:/wh",
            "source": "spark",
        }


def test_a_path_dataset_has_no_catalog_facet() -> None:
    app = dataclasses.replace(APP, catalog=CATALOG)
    event = action_event(app, action_run(app, PLANNED), PLANNED, "START", 1_000)
    assert "catalog" not in event["outputs"][0]["facets"]
    assert "catalog" not in event["inputs"][0]["facets"]


def test_an_action_from_spark_sql_carries_its_text_in_the_sql_job_facet() -> None:
    facts = dataclasses.replace(PLANNED, sql="INSERT INTO daily SELECT id FROM orders")
    run = action_run(APP, facts)
    events = [action_event(APP, run, facts, t, 1_000) for t in ("START", "RUNNING", "COMPLETE")]
    for event in events:
        assert VALIDATOR.validate(event) == []
        sql = event["job"]["facets"]["sql"]
        assert (sql["query"], sql["dialect"]) == (facts.sql, "spark")
        assert sql["_schemaURL"].endswith("/1-1-0/SQLJobFacet.json#/$defs/SQLJobFacet")
    api = action_event(APP, run, PLANNED, "START", 1_000)
    assert "sql" not in api["job"]["facets"]


def test_create_table_output_has_the_new_tables_schema() -> None:
    create = ExecutionFacts(
        5,
        "command",
        "Execute CreateDataSourceTableCommand",
        1_000,
        1_100,
        None,
        output_schema=[("id", "integer"), ("name", "string")],
        write=WriteFacts(("file", "/wh/t"), ("file:/wh", "default.t"), "CREATE"),
    )
    event = action_event(APP, action_run(APP, create), create, "COMPLETE", 1_100)
    assert VALIDATOR.validate(event) == []
    assert event["outputs"][0]["facets"]["schema"]["fields"] == [
        {"name": "id", "type": "integer"},
        {"name": "name", "type": "string"},
    ]


def test_a_renamed_table_names_the_dataset_it_was_in_the_lifecycle_facet() -> None:
    renamed = ExecutionFacts(
        6,
        "command",
        "Execute AlterTableRenameCommand",
        1_000,
        1_100,
        None,
        write=WriteFacts(
            ("file", "/wh/new"), ("file:/wh", "default.new"), "RENAME", previous=("file", "/wh/old")
        ),
    )
    event = action_event(APP, action_run(APP, renamed), renamed, "COMPLETE", 1_100)
    assert VALIDATOR.validate(event) == []
    lifecycle = event["outputs"][0]["facets"]["lifecycleStateChange"]
    assert lifecycle["lifecycleStateChange"] == "RENAME"
    assert lifecycle["previousIdentifier"] == {"namespace": "file", "name": "/wh/old"}


def test_column_lineage_carries_filters_once_at_dataset_level_or_in_each_field() -> None:
    package = "org.apache.spark.sql.catalyst"

    def column(name: str, expr_id: int) -> list[dict[str, object]]:
        return [
            {
                "class": f"{package}.expressions.AttributeReference",
                "num-children": 0,
                "name": name,
                "dataType": "long",
                "exprId": {"id": expr_id},
            }
        ]

    greater = [{"class": f"{package}.expressions.GreaterThan", "num-children": 2}]
    literal = [{"class": f"{package}.expressions.Literal", "num-children": 0}]
    query = parse_tree(
        [
            {
                "class": f"{package}.plans.logical.Filter",
                "num-children": 1,
                "condition": greater + column("amount", 2) + literal,
            },
            {
                "class": "org.apache.spark.sql.execution.datasources.LogicalRelation",
                "num-children": 0,
                "output": [column("id", 1), column("amount", 2)],
            },
        ]
    )
    facts = dataclasses.replace(PLANNED, query=query)
    run = action_run(APP, facts)
    # By default, as the official integration 1.53 by default: the WHERE once, at dataset level.
    event = action_event(APP, run, facts, "START", 1_000)
    assert VALIDATOR.validate(event) == []
    facet = event["outputs"][0]["facets"]["columnLineage"]
    assert [f["field"] for f in facet["fields"]["id"]["inputFields"]] == ["id"]
    assert [(f["field"], f["transformations"][0]["subtype"]) for f in facet["dataset"]] == [
        ("amount", "FILTER")
    ]
    # datasetLineageEnabled=false: the older shape, the WHERE in every field.
    field_level = dataclasses.replace(APP, dataset_lineage=False)
    event = action_event(field_level, run, facts, "START", 1_000)
    assert VALIDATOR.validate(event) == []
    facet = event["outputs"][0]["facets"]["columnLineage"]
    assert "dataset" not in facet
    assert facet["fields"]["id"]["inputFields"] == [
        {
            "namespace": "file",
            "name": "/in/orders",
            "field": "id",
            "transformations": [
                {"type": "DIRECT", "subtype": "IDENTITY", "description": "", "masking": False}
            ],
        },
        {
            "namespace": "file",
            "name": "/in/orders",
            "field": "amount",
            "transformations": [
                {"type": "INDIRECT", "subtype": "FILTER", "description": "", "masking": False}
            ],
        },
    ]
