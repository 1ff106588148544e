"""Column lineage over Catalyst plan JSON, for the common plan shapes (no JVM needed)."""

from __future__ import annotations

from typing import Any

from spark_emitter.column_lineage import column_lineage
from spark_emitter.plan import parse_tree

PKG = "org.apache.spark.sql.catalyst"


def attr(name: str, expr_id: int, data_type: str = "integer") -> list[dict[str, Any]]:
    return [
        {
            "class": f"{PKG}.expressions.AttributeReference",
            "num-children": 0,
            "name": name,
            "dataType": data_type,
            "exprId": {"id": expr_id},
        }
    ]


def alias(name: str, expr_id: int, body: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "class": f"{PKG}.expressions.Alias",
            "num-children": 1,
            "name": name,
            "exprId": {"id": expr_id},
        },
        *body,
    ]


def call(cls: str, *args: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"class": f"{PKG}.expressions.{cls}", "num-children": len(args)}] + [
        node for arg in args for node in arg
    ]


def relation(*columns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "class": "org.apache.spark.sql.execution.datasources.LogicalRelation",
            "num-children": 0,
            "output": list(columns),
        }
    ]


def node(cls: str, children: int, **fields: Any) -> dict[str, Any]:
    return {"class": f"{PKG}.plans.logical.{cls}", "num-children": children, **fields}


A = ("file", "/data/a")
B = ("file", "/data/b")


def simple(columns: dict[Any, set[tuple[str, str]]]) -> dict[tuple[str, str], set[str]]:
    return {(c[1], c[2]): {f"{t}/{s}" for t, s in kinds} for c, kinds in columns.items()}


def test_projection_keeps_identity_and_marks_expressions_as_transformation() -> None:
    plan = [
        node(
            "Project",
            1,
            projectList=[
                attr("id", 1),
                alias("double", 10, call("Multiply", attr("amount", 2), call("Literal"))),
                alias("renamed", 11, attr("id", 1)),
            ],
        ),
        *relation(attr("id", 1), attr("amount", 2)),
    ]
    result = column_lineage(parse_tree(plan), [[A]])
    assert simple(result.fields["id"]) == {("/data/a", "id"): {"DIRECT/IDENTITY"}}
    assert simple(result.fields["double"]) == {("/data/a", "amount"): {"DIRECT/TRANSFORMATION"}}
    assert simple(result.fields["renamed"]) == {("/data/a", "id"): {"DIRECT/IDENTITY"}}
    assert result.dataset == {}


def test_aggregate_is_aggregation_and_grouping_is_indirect_group_by() -> None:
    plan = [
        node(
            "Aggregate",
            1,
            groupingExpressions=[attr("k", 1)],
            aggregateExpressions=[
                attr("k", 1),
                alias("total", 10, call("AggregateExpression", call("Sum", attr("v", 2)))),
                alias(
                    "shown",
                    11,
                    call("Upper", call("AggregateExpression", call("First", attr("v", 2)))),
                ),
            ],
        ),
        *relation(attr("k", 1), attr("v", 2)),
    ]
    result = column_lineage(parse_tree(plan), [[A]])
    assert simple(result.fields["total"]) == {("/data/a", "v"): {"DIRECT/AGGREGATION"}}
    assert simple(result.fields["shown"]) == {("/data/a", "v"): {"DIRECT/AGGREGATION"}}
    assert simple(result.dataset) == {("/data/a", "k"): {"INDIRECT/GROUP_BY"}}


def test_join_filter_and_sort_are_dataset_level_indirect() -> None:
    plan = [
        node("Sort", 1, order=[call("SortOrder", attr("v", 2))]),
        node("Filter", 1, condition=call("GreaterThan", attr("v", 2), call("Literal"))),
        node("Join", 2, condition=call("EqualTo", attr("k", 1), attr("k", 3))),
        *relation(attr("k", 1), attr("v", 2)),
        *relation(attr("k", 3), attr("w", 4)),
    ]
    result = column_lineage(parse_tree(plan), [[A], [B]])
    assert simple(result.fields["w"]) == {("/data/b", "w"): {"DIRECT/IDENTITY"}}
    assert simple(result.dataset) == {
        ("/data/a", "k"): {"INDIRECT/JOIN"},
        ("/data/b", "k"): {"INDIRECT/JOIN"},
        ("/data/a", "v"): {"INDIRECT/FILTER", "INDIRECT/SORT"},
    }


def test_union_merges_columns_by_position() -> None:
    plan = [
        node("Union", 2),
        *relation(attr("x", 1)),
        *relation(attr("y", 2)),
    ]
    result = column_lineage(parse_tree(plan), [[A], [B]])
    assert simple(result.fields["x"]) == {
        ("/data/a", "x"): {"DIRECT/IDENTITY"},
        ("/data/b", "y"): {"DIRECT/IDENTITY"},
    }


def test_window_function_depends_indirectly_on_partition_and_order() -> None:
    spec = call(
        "WindowSpecDefinition", attr("k", 1), call("SortOrder", attr("v", 2)), call("Frame")
    )
    plan = [
        node(
            "Window",
            1,
            windowExpressions=[
                alias("rank", 10, call("WindowExpression", call("RowNumber"), spec))
            ],
        ),
        *relation(attr("k", 1), attr("v", 2)),
    ]
    result = column_lineage(parse_tree(plan), [[A]])
    assert simple(result.fields["rank"]) == {
        ("/data/a", "k"): {"INDIRECT/WINDOW"},
        ("/data/a", "v"): {"INDIRECT/WINDOW"},
    }
    assert simple(result.fields["v"]) == {("/data/a", "v"): {"DIRECT/IDENTITY"}}


def test_case_when_conditions_are_conditional_and_values_transformed() -> None:
    plan = [
        node(
            "Project",
            1,
            projectList=[
                alias("band", 10, call("CaseWhen", call("GreaterThan", attr("v", 2)), attr("k", 1)))
            ],
        ),
        *relation(attr("k", 1), attr("v", 2)),
    ]
    result = column_lineage(parse_tree(plan), [[A]])
    assert simple(result.fields["band"]) == {
        ("/data/a", "v"): {"INDIRECT/CONDITIONAL"},
        ("/data/a", "k"): {"DIRECT/TRANSFORMATION"},
    }


def test_leaves_that_are_not_datasets_contribute_nothing() -> None:
    plan = [node("Union", 2), *relation(attr("x", 1)), *relation(attr("x", 2))]
    result = column_lineage(parse_tree(plan), [[], [B]], output_names=["renamed"])
    assert simple(result.fields["renamed"]) == {("/data/b", "x"): {"DIRECT/IDENTITY"}}
