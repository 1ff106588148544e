"""Column-level lineage of one query, computed from its Catalyst plan tree.

Works bottom-up over a :class:`~spark_emitter.plan.Node` tree. Every attribute a node
outputs is traced to the leaf columns (of the datasets read) it was computed from, with
the OpenLineage transformation kinds: DIRECT (IDENTITY, TRANSFORMATION, AGGREGATION) for
columns that flow into a value, INDIRECT for columns that decide which rows there are or
how they are arranged — FILTER, JOIN, GROUP_BY, SORT, WINDOW, CONDITIONAL. Indirect
dependencies that affect the whole output (a WHERE, a join key, a GROUP BY) are kept at
dataset level, as the facet's ``dataset`` list.

Pure Python: the JVM is needed only to produce the plan JSON (see :mod:`.plan_reader`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from spark_emitter.plan import Attribute, Node

__all__ = ["ColumnLineage", "InputColumn", "Transformation", "column_lineage", "plan_output"]

DIRECT, INDIRECT = "DIRECT", "INDIRECT"
_DIRECT_RANK = {"IDENTITY": 0, "TRANSFORMATION": 1, "AGGREGATION": 2}

Transformation = tuple[str, str]  # (type, subtype)
InputColumn = tuple[str, str, str]  # (dataset namespace, dataset name, field)
# attribute exprId -> leaf attribute exprId -> how the leaf column reaches the attribute
_Lineage = dict[int, dict[int, set[Transformation]]]

IDENTITY: Transformation = (DIRECT, "IDENTITY")
TRANSFORMATION: Transformation = (DIRECT, "TRANSFORMATION")
AGGREGATION: Transformation = (DIRECT, "AGGREGATION")


@dataclass
class ColumnLineage:
    """Per output field: input columns and transformations; plus dataset-level inputs."""

    fields: dict[str, dict[InputColumn, set[Transformation]]] = field(default_factory=dict)
    dataset: dict[InputColumn, set[Transformation]] = field(default_factory=dict)


def _compose(outer: Transformation, inner: Iterable[Transformation]) -> set[Transformation]:
    """How a leaf column reaches a value through ``inner`` and then ``outer``."""
    result: set[Transformation] = set()
    for kind, subtype in inner:
        if kind == INDIRECT:
            result.add((kind, subtype))
        elif outer[0] == INDIRECT:
            result.add(outer)
        else:
            stronger = max(subtype, outer[1], key=lambda s: _DIRECT_RANK.get(s, 1))
            result.add((DIRECT, stronger))
    return result


def _merge(into: dict[int, set[Transformation]], more: Mapping[int, set[Transformation]]) -> None:
    for leaf, kinds in more.items():
        into.setdefault(leaf, set()).update(kinds)


class _Tracer:
    """Walks one plan; ``leaf_columns`` fills up with the leaves' attributes."""

    def __init__(self) -> None:
        self.leaf_attributes: list[list[Attribute]] = []
        self.dataset_level: dict[int, set[Transformation]] = {}

    # -- expressions -------------------------------------------------------------------
    def _expression_sources(
        self, expr: Node, child: _Lineage, context: Transformation
    ) -> dict[int, set[Transformation]]:
        """Leaf columns feeding ``expr`` and how, given the enclosing ``context``."""
        sources: dict[int, set[Transformation]] = {}
        if expr.cls == "AttributeReference":
            attr = expr.attribute()
            if attr is not None:
                for leaf, kinds in child.get(attr.expr_id, {}).items():
                    sources.setdefault(leaf, set()).update(_compose(context, kinds))
            return sources
        if context[0] == DIRECT:
            # Aggregating dominates transforming, which dominates passing through.
            if expr.cls == "AggregateExpression":
                context = AGGREGATION
            elif expr.cls not in ("Alias", "Cast") and context == IDENTITY:
                context = TRANSFORMATION
        parts: list[tuple[Node, Transformation]]
        if expr.cls == "WindowSpecDefinition":
            parts = [(c, (INDIRECT, "WINDOW")) for c in expr.children]
        elif expr.cls == "SortOrder" and context[0] == INDIRECT:
            parts = [(c, context) for c in expr.children]
        elif expr.cls == "If" and expr.children:
            parts = [(expr.children[0], (INDIRECT, "CONDITIONAL"))]
            parts += [(c, context) for c in expr.children[1:]]
        elif expr.cls == "CaseWhen":
            # children: cond1, value1, cond2, value2, ..., [else]
            parts = [
                (
                    c,
                    (INDIRECT, "CONDITIONAL")
                    if i % 2 == 0 and i + 1 < len(expr.children)
                    else context,
                )
                for i, c in enumerate(expr.children)
            ]
        else:
            parts = [(c, context) for c in expr.children]
        for part, part_context in parts:
            _merge(sources, self._expression_sources(part, child, part_context))
        return sources

    def _named(self, exprs: Sequence[Node], child: _Lineage) -> tuple[list[Attribute], _Lineage]:
        outputs: list[Attribute] = []
        lineage: _Lineage = {}
        for expr in exprs:
            attr = expr.attribute()
            if attr is None:
                continue
            outputs.append(attr)
            if expr.cls == "AttributeReference":
                lineage[attr.expr_id] = {k: set(v) for k, v in child.get(attr.expr_id, {}).items()}
            else:
                body = expr.children[0] if expr.children else expr
                lineage[attr.expr_id] = self._expression_sources(body, child, IDENTITY)
        return outputs, lineage

    def _dataset_level(self, exprs: Iterable[Node], child: _Lineage, subtype: str) -> None:
        for expr in exprs:
            _merge(self.dataset_level, self._expression_sources(expr, child, (INDIRECT, subtype)))

    # -- plans -------------------------------------------------------------------------
    def trace(self, node: Node) -> tuple[list[Attribute], _Lineage]:
        """The node's output attributes and where each comes from."""
        results = [self.trace(child) for child in node.children]
        child: _Lineage = {}
        for _, lineage in results:
            child.update(lineage)
        child_outputs = [attr for outputs, _ in results for attr in outputs]

        if not node.children:
            outputs = _leaf_output(node)
            self.leaf_attributes.append(outputs)
            return outputs, {a.expr_id: {a.expr_id: {IDENTITY}} for a in outputs}
        if node.cls == "Project":
            return self._named(node.expressions("projectList"), child)
        if node.cls == "Aggregate":
            self._dataset_level(node.expressions("groupingExpressions"), child, "GROUP_BY")
            return self._named(node.expressions("aggregateExpressions"), child)
        if node.cls == "Window":
            outputs, lineage = self._named(node.expressions("windowExpressions"), child)
            passthrough = {a.expr_id: child.get(a.expr_id, {}) for a in child_outputs}
            return child_outputs + outputs, {**passthrough, **lineage}
        if node.cls == "Filter":
            self._dataset_level(node.expressions("condition"), child, "FILTER")
        elif node.cls == "Join":
            self._dataset_level(node.expressions("condition"), child, "JOIN")
            join_type = str((node.fields.get("joinType") or {}).get("object", ""))
            if "LeftSemi" in join_type or "LeftAnti" in join_type:
                return results[0][0], results[0][1]
        elif node.cls == "Sort":
            self._dataset_level(node.expressions("order"), child, "SORT")
        elif node.cls == "Union" and results:
            first_outputs = results[0][0]
            merged: _Lineage = {}
            for position, attr in enumerate(first_outputs):
                sources: dict[int, set[Transformation]] = {}
                for outputs, lineage in results:
                    if position < len(outputs):
                        _merge(sources, lineage.get(outputs[position].expr_id, {}))
                merged[attr.expr_id] = sources
            return first_outputs, merged
        # Filter, Join, Sort, Limit, Repartition, SubqueryAlias, WriteFiles, ...: rows change,
        # columns pass through unchanged.
        return child_outputs, child


def _leaf_output(node: Node) -> list[Attribute]:
    for key in ("output",):
        attrs = [e.attribute() for e in node.expressions(key)]
        if attrs:
            return [a for a in attrs if a is not None]
    attrs = [e.attribute() for key in ("dataCols", "partitionCols") for e in node.expressions(key)]
    return [a for a in attrs if a is not None]


def plan_output(query: Node) -> list[Attribute]:
    """The output attributes of ``query`` (the columns it produces, in order)."""
    return _Tracer().trace(query)[0]


def column_lineage(
    query: Node,
    leaf_datasets: Sequence[Sequence[tuple[str, str]]],
    output_names: Sequence[str] | None = None,
) -> ColumnLineage:
    """Lineage of ``query``'s output columns onto the columns of the datasets it reads.

    ``leaf_datasets[i]`` are the (namespace, name) read by the i-th leaf of ``query`` in
    pre-order: one, several for a read of several paths, none for leaves that are not
    datasets (literal rows, RDDs). Output columns are named ``output_names`` (a write's
    target columns) or by the plan.
    """
    tracer = _Tracer()
    outputs, lineage = tracer.trace(query)
    leaf_columns: dict[int, list[InputColumn]] = {}
    for attrs, datasets in zip(tracer.leaf_attributes, leaf_datasets, strict=False):
        for attr in attrs:
            leaf_columns[attr.expr_id] = [(ns, name, attr.name) for ns, name in datasets]

    def resolve(
        sources: Mapping[int, set[Transformation]],
    ) -> dict[InputColumn, set[Transformation]]:
        resolved: dict[InputColumn, set[Transformation]] = {}
        for leaf, kinds in sources.items():
            for column in leaf_columns.get(leaf, []):
                resolved.setdefault(column, set()).update(kinds)
        return resolved

    result = ColumnLineage(dataset=resolve(tracer.dataset_level))
    names = list(output_names) if output_names else [a.name for a in outputs]
    for name, attr in zip(names, outputs, strict=False):
        inputs = resolve(lineage.get(attr.expr_id, {}))
        if inputs:
            result.fields[name] = inputs
    return result
