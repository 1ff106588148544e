"""Column lineage over Catalyst plan JSON, for the common plan shapes (no JVM needed)."""

from __future__ import annotations

from typing import Any

from spark_emitter.column_lineage import Transformation, column_lineage
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


def simple(columns: dict[Any, list[Transformation]]) -> dict[tuple[str, str], set[str]]:
    return {
        (c[1], c[2]): {f"{t.type}/{t.subtype}" + ("/masking" if t.masking else "") for t in kinds}
        for c, kinds in columns.items()
    }


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


def test_case_when_conditions_are_conditional_and_values_keep_their_kind() -> None:
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
    # As the official integration: a branch's value passes through as it is.
    assert simple(result.fields["band"]) == {
        ("/data/a", "v"): {"INDIRECT/CONDITIONAL"},
        ("/data/a", "k"): {"DIRECT/IDENTITY"},
    }


def test_leaves_that_are_not_datasets_contribute_nothing() -> None:
    plan = [node("Union", 2), *relation(attr("x", 1)), *relation(attr("x", 2))]
    result = column_lineage(parse_tree(plan), [[], [B]], output_names=["renamed"])
    assert simple(result.fields["renamed"]) == {("/data/b", "x"): {"DIRECT/IDENTITY"}}


def _grouped_join_plan() -> list[dict[str, Any]]:
    """SELECT a.k, concat(a.v) AS t, count(*) AS n FROM a JOIN b ON a.k = b.k
    WHERE b.w > 1 GROUP BY a.k, a.v"""
    return [
        node(
            "Aggregate",
            1,
            groupingExpressions=[attr("k", 1), attr("v", 2)],
            aggregateExpressions=[
                attr("k", 1),
                alias("t", 10, call("Concat", attr("v", 2), call("Literal"))),
                alias("n", 11, call("AggregateExpression", call("Count", call("Literal")))),
            ],
        ),
        node("Join", 2, condition=call("EqualTo", attr("k", 1), attr("k", 3))),
        *relation(attr("k", 1), attr("v", 2)),
        node("Filter", 1, condition=call("GreaterThan", attr("w", 4), call("Literal"))),
        *relation(attr("k", 3), attr("w", 4)),
    ]


def test_official_default_adds_every_dataset_dependency_to_each_field_in_plan_order() -> None:
    # The shape of the official integration's pysparkCLLEnd.json: a field's own direct
    # transformation first, then GROUP_BY, JOIN, FILTER as the plan nests them.
    result = column_lineage(parse_tree(_grouped_join_plan()), [[A], [B]])
    fields = result.fields_with_dataset_dependencies()
    a_k = ("file", "/data/a", "k")
    assert [(t.type, t.subtype) for t in fields["k"][a_k]] == [
        ("DIRECT", "IDENTITY"),
        ("INDIRECT", "GROUP_BY"),
        ("INDIRECT", "JOIN"),
    ]
    assert simple(fields["t"]) == {
        ("/data/a", "v"): {"DIRECT/TRANSFORMATION", "INDIRECT/GROUP_BY"},
        ("/data/a", "k"): {"INDIRECT/GROUP_BY", "INDIRECT/JOIN"},
        ("/data/b", "k"): {"INDIRECT/JOIN"},
        ("/data/b", "w"): {"INDIRECT/FILTER"},
    }
    # count(*) reads no column of its own: the official integration leaves it out of
    # `fields` (ColumnLevelLineageBuilder.buildFields drops fields without inputs).
    assert "n" not in fields
    # The dataset-level option keeps fields to their own dependencies.
    assert simple(result.fields["t"]) == {("/data/a", "v"): {"DIRECT/TRANSFORMATION"}}
    assert simple(result.dataset)[("/data/b", "w")] == {"INDIRECT/FILTER"}


def test_hashing_and_counting_mask_the_value_through_the_whole_path() -> None:
    # The official ColumnLineageWithTransformationTypesTest.simpleQueryMasking and
    # simpleQueryOnlyAggregation: sha1 masks, and count masks.
    plan = [
        node(
            "Aggregate",
            1,
            groupingExpressions=[attr("k", 1)],
            aggregateExpressions=[
                alias("mt", 10, call("Sha1", call("Cast", call("Add", attr("k", 1))))),
                alias(
                    "ma",
                    11,
                    call(
                        "Sha1", call("Cast", call("AggregateExpression", call("Sum", attr("v", 2))))
                    ),
                ),
                alias("c", 12, call("AggregateExpression", call("Count", attr("v", 2)))),
                alias("s", 13, call("AggregateExpression", call("Sum", attr("v", 2)))),
            ],
        ),
        *relation(attr("k", 1), attr("v", 2)),
    ]
    result = column_lineage(parse_tree(plan), [[A]])
    assert simple(result.fields["mt"]) == {("/data/a", "k"): {"DIRECT/TRANSFORMATION/masking"}}
    assert simple(result.fields["ma"]) == {("/data/a", "v"): {"DIRECT/AGGREGATION/masking"}}
    assert simple(result.fields["c"]) == {("/data/a", "v"): {"DIRECT/AGGREGATION/masking"}}
    assert simple(result.fields["s"]) == {("/data/a", "v"): {"DIRECT/AGGREGATION"}}


def test_case_when_value_branches_keep_identity_and_transformation_apart() -> None:
    # ColumnLineageWithTransformationTypesTest.simpleQueryWithConditional:
    # CASE WHEN b > 1 THEN a ELSE a + b END
    plan = [
        node(
            "Project",
            1,
            projectList=[
                alias(
                    "cond",
                    10,
                    call(
                        "CaseWhen",
                        call("GreaterThan", attr("b", 2), call("Literal")),
                        attr("a", 1),
                        call("Add", attr("a", 1), attr("b", 2)),
                    ),
                )
            ],
        ),
        *relation(attr("a", 1), attr("b", 2)),
    ]
    result = column_lineage(parse_tree(plan), [[A]])
    assert simple(result.fields["cond"]) == {
        ("/data/a", "a"): {"DIRECT/IDENTITY", "DIRECT/TRANSFORMATION"},
        ("/data/a", "b"): {"DIRECT/TRANSFORMATION", "INDIRECT/CONDITIONAL"},
    }


def test_rank_depends_on_the_window_only_and_distinct_over_union_is_no_group_by() -> None:
    spec = call("WindowSpecDefinition", attr("k", 1), call("SortOrder", attr("v", 2)))
    ranked = [
        node(
            "Window",
            1,
            windowExpressions=[
                alias("r", 10, call("WindowExpression", call("Rank", attr("v", 2)), spec))
            ],
        ),
        *relation(attr("k", 1), attr("v", 2)),
    ]
    result = column_lineage(parse_tree(ranked), [[A]])
    assert simple(result.fields["r"]) == {
        ("/data/a", "k"): {"INDIRECT/WINDOW"},
        ("/data/a", "v"): {"INDIRECT/WINDOW"},
    }
    distinct = [
        node(
            "Aggregate", 1, groupingExpressions=[attr("x", 1)], aggregateExpressions=[attr("x", 1)]
        ),
        node("Union", 2),
        *relation(attr("x", 1)),
        *relation(attr("y", 2)),
    ]
    assert column_lineage(parse_tree(distinct), [[A], [B]]).dataset == {}


def test_a_filter_on_a_computed_column_is_a_filter_on_what_it_was_computed_from() -> None:
    plan = [
        node("Filter", 1, condition=call("IsNotNull", attr("band", 10))),
        node(
            "Project",
            1,
            projectList=[
                alias("band", 10, call("If", attr("v", 2), attr("k", 1), call("Literal")))
            ],
        ),
        *relation(attr("k", 1), attr("v", 2)),
    ]
    result = column_lineage(parse_tree(plan), [[A]])
    assert simple(result.dataset) == {
        ("/data/a", "k"): {"INDIRECT/FILTER"},
        ("/data/a", "v"): {"INDIRECT/FILTER"},
    }


def test_exploded_columns_are_transformations_of_the_generator_arguments() -> None:
    plan = [
        node(
            "Generate",
            1,
            generator=call("Explode", attr("items", 2)),
            unrequiredChildIndex=[1],
            generatorOutput=[attr("item", 10)],
        ),
        *relation(attr("id", 1), attr("items", 2)),
    ]
    result = column_lineage(parse_tree(plan), [[A]])
    assert list(result.fields) == ["id", "item"]
    assert simple(result.fields["item"]) == {("/data/a", "items"): {"DIRECT/TRANSFORMATION"}}
