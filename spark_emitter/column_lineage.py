"""Column-level lineage of one query, computed from its Catalyst plan tree.

Works bottom-up over a :class:`~spark_emitter.plan.Node` tree. Every attribute a node
outputs is traced to the leaf columns (of the datasets read) it was computed from, with
the OpenLineage transformation kinds the official Spark integration uses: DIRECT
(IDENTITY, TRANSFORMATION, AGGREGATION) for columns that flow into a value, INDIRECT for
columns that decide which rows there are or how they are arranged — FILTER, JOIN,
GROUP_BY, SORT, WINDOW, CONDITIONAL — and ``masking`` when a hash or mask hides the
value (sha1, sha2, md5, crc32, hash, xxhash64, mask, count).

Indirect dependencies of a whole plan node (a WHERE, a join key, a GROUP BY, an ORDER BY)
affect every output column; they are kept apart in :attr:`ColumnLineage.dataset`, in plan
order, and the facet builder either reports them as the facet's dataset-level list (the
official default, its ``datasetLineageEnabled`` option) or adds them to each field.

Pure Python: the JVM is needed only to produce the plan JSON (see :mod:`.plan_reader`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from spark_emitter.plan import Attribute, Node

__all__ = ["ColumnLineage", "InputColumn", "Transformation", "column_lineage", "plan_output"]

DIRECT, INDIRECT = "DIRECT", "INDIRECT"


class Transformation(NamedTuple):
    """How an input column reaches an output value (one ``transformations`` entry)."""

    type: str
    subtype: str
    masking: bool = False


InputColumn = tuple[str, str, str]  # (dataset namespace, dataset name, field)
# leaf attribute exprId -> how the leaf column reaches a value
_Sources = dict[int, set[Transformation]]
# attribute exprId -> its sources
_Lineage = dict[int, _Sources]

IDENTITY = Transformation(DIRECT, "IDENTITY")
TRANSFORMATION = Transformation(DIRECT, "TRANSFORMATION")
AGGREGATION = Transformation(DIRECT, "AGGREGATION")
# Of two direct kinds on one path the stronger wins: aggregating hides more than
# transforming, which hides more than passing through.
_DIRECT_STRENGTH = {"AGGREGATION": 0, "TRANSFORMATION": 1, "IDENTITY": 2}
_SUBTYPE_ORDER = {
    name: rank
    for rank, name in enumerate(
        ("IDENTITY", "TRANSFORMATION", "AGGREGATION", "CONDITIONAL", "WINDOW")
    )
}
# Expressions whose result does not reveal their input (the official integration's list).
_MASKING = frozenset(
    {"Crc32", "HiveHash", "Md5", "Murmur3Hash", "Sha1", "Sha2", "XxHash64", "Count", "Mask"}
)
# Window functions whose value depends on the window's order only, not on their arguments.
_POSITIONAL_WINDOW_FUNCTIONS = frozenset(
    {"Rank", "DenseRank", "PercentRank", "RowNumber", "CumeDist", "NTile"}
)


def indirect(subtype: str) -> Transformation:
    return Transformation(INDIRECT, subtype)


def _then(outer: Transformation, inner: Transformation) -> Transformation:
    """How a column reaches a value through ``inner`` and then ``outer``.

    An indirect step makes the whole path indirect, the outer one naming it (a FILTER on a
    computed column is a FILTER on what it was computed from); masking anywhere masks.
    """
    if outer.type == INDIRECT:
        chosen = outer
    elif inner.type == INDIRECT:
        chosen = inner
    else:
        chosen = min(outer, inner, key=lambda t: _DIRECT_STRENGTH.get(t.subtype, 1))
    return chosen._replace(masking=outer.masking or inner.masking)


def _merge(into: _Sources, more: Mapping[int, set[Transformation]]) -> None:
    for leaf, kinds in more.items():
        into.setdefault(leaf, set()).update(kinds)


@dataclass
class ColumnLineage:
    """Per output field: the input columns it is computed from and how (its own
    expression's dependencies); plus the dataset-level inputs that decide which rows
    every field has, in plan order (outermost node first)."""

    fields: dict[str, dict[InputColumn, list[Transformation]]] = field(default_factory=dict)
    dataset: dict[InputColumn, list[Transformation]] = field(default_factory=dict)

    def fields_with_dataset_dependencies(
        self,
    ) -> dict[str, dict[InputColumn, list[Transformation]]]:
        """Each field's inputs with the dataset-level ones added, as the official
        integration reports them by default (fields without inputs of their own, such as
        ``count(*)``, stay out, as there)."""
        combined: dict[str, dict[InputColumn, list[Transformation]]] = {}
        for name, columns in self.fields.items():
            merged = {column: list(kinds) for column, kinds in columns.items()}
            for column, kinds in self.dataset.items():
                known = merged.setdefault(column, [])
                known.extend(kind for kind in kinds if kind not in known)
            combined[name] = merged
        return combined


class _Tracer:
    """Walks one plan; ``leaf_attributes`` fills up with the leaves' attributes."""

    def __init__(self) -> None:
        self.leaf_attributes: list[list[Attribute]] = []
        # (pre-order position of the plan node, the leaf columns it depends on)
        self.dataset_level: list[tuple[int, _Sources]] = []
        self._visited = 0

    # -- expressions -------------------------------------------------------------------
    def _expression_sources(self, expr: Node, child: _Lineage, context: Transformation) -> _Sources:
        """Leaf columns feeding ``expr`` and how, given the enclosing ``context``."""
        sources: _Sources = {}
        if expr.cls == "AttributeReference":
            attr = expr.attribute()
            if attr is not None:
                for leaf, kinds in child.get(attr.expr_id, {}).items():
                    sources.setdefault(leaf, set()).update(_then(context, k) for k in kinds)
            return sources
        for part, part_context in self._parts(expr, context):
            _merge(sources, self._expression_sources(part, child, part_context))
        return sources

    @staticmethod
    def _parts(expr: Node, context: Transformation) -> list[tuple[Node, Transformation]]:
        """The sub-expressions of ``expr`` that matter, each with how it reaches the value."""
        children = expr.children
        if expr.cls == "Alias":
            return [(c, context) for c in children]
        if expr.cls == "CaseWhen":
            # children: cond1, value1, cond2, value2, ..., [else]
            conditional = _then(context, indirect("CONDITIONAL"))
            return [
                (c, conditional if i % 2 == 0 and i + 1 < len(children) else context)
                for i, c in enumerate(children)
            ]
        if expr.cls == "If" and children:
            conditional = _then(context, indirect("CONDITIONAL"))
            return [(children[0], conditional)] + [(c, context) for c in children[1:]]
        if expr.cls == "AggregateExpression":
            return [(children[0], _then(context, AGGREGATION))] if children else []
        if expr.cls == "WindowExpression" and len(children) == 2:
            function, spec = children
            window = _then(context, indirect("WINDOW"))
            parts = [(c, window) for c in spec.children]
            if function.cls not in _POSITIONAL_WINDOW_FUNCTIONS:
                parts.insert(0, (function, _then(context, TRANSFORMATION)))
            return parts
        step = TRANSFORMATION._replace(masking=expr.cls in _MASKING)
        return [(c, _then(context, step)) for c in children]

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
                lineage[attr.expr_id] = self._expression_sources(expr, child, IDENTITY)
        return outputs, lineage

    def _dataset_level(
        self, position: int, exprs: Iterable[Node], child: _Lineage, subtype: str
    ) -> None:
        sources: _Sources = {}
        for expr in exprs:
            _merge(sources, self._expression_sources(expr, child, indirect(subtype)))
        if sources:
            self.dataset_level.append((position, sources))

    # -- plans -------------------------------------------------------------------------
    def trace(self, node: Node) -> tuple[list[Attribute], _Lineage]:
        """The node's output attributes and where each comes from."""
        position = self._visited
        self._visited += 1
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
            grouping = node.expressions("groupingExpressions")
            aggregates = node.expressions("aggregateExpressions")
            if not (
                node.children[0].cls == "Union" and _groups_by_everything(grouping, aggregates)
            ):
                # A DISTINCT over a UNION only removes duplicates: no GROUP_BY there.
                self._dataset_level(position, grouping, child, "GROUP_BY")
            return self._named(aggregates, child)
        if node.cls == "Window":
            outputs, lineage = self._named(node.expressions("windowExpressions"), child)
            passthrough = {a.expr_id: child.get(a.expr_id, {}) for a in child_outputs}
            return child_outputs + outputs, {**passthrough, **lineage}
        if node.cls == "Generate":
            return self._generate(node, child_outputs, child)
        if node.cls == "Filter":
            self._dataset_level(position, node.expressions("condition"), child, "FILTER")
        elif node.cls == "Join":
            self._dataset_level(position, node.expressions("condition"), child, "JOIN")
            join_type = str((node.fields.get("joinType") or {}).get("object", ""))
            if "LeftSemi" in join_type or "LeftAnti" in join_type:
                return results[0][0], results[0][1]
        elif node.cls == "Sort":
            self._dataset_level(position, node.expressions("order"), child, "SORT")
        elif node.cls == "Union" and results:
            first_outputs = results[0][0]
            merged: _Lineage = {}
            for index, attr in enumerate(first_outputs):
                sources: _Sources = {}
                for outputs, lineage in results:
                    if index < len(outputs):
                        _merge(sources, lineage.get(outputs[index].expr_id, {}))
                merged[attr.expr_id] = sources
            return first_outputs, merged
        # Filter, Join, Sort, Limit, Repartition, SubqueryAlias, WriteFiles, ...: rows change,
        # columns pass through unchanged.
        return child_outputs, child

    def _generate(
        self, node: Node, child_outputs: list[Attribute], child: _Lineage
    ) -> tuple[list[Attribute], _Lineage]:
        """``explode`` and friends: each generated column is computed from the generator's
        arguments; the child's columns the plan still needs pass through."""
        indexes = node.fields.get("unrequiredChildIndex")
        unrequired = (
            {i for i in indexes if isinstance(i, int)} if isinstance(indexes, list) else set()
        )
        kept = [a for i, a in enumerate(child_outputs) if i not in unrequired]
        generated = [a for e in node.expressions("generatorOutput") if (a := e.attribute())]
        sources: _Sources = {}
        for generator in node.expressions("generator"):
            for argument in generator.children:
                _merge(sources, self._expression_sources(argument, child, TRANSFORMATION))
        lineage = {a.expr_id: child.get(a.expr_id, {}) for a in kept}
        lineage.update({a.expr_id: {k: set(v) for k, v in sources.items()} for a in generated})
        return kept + generated, lineage


def _groups_by_everything(grouping: Sequence[Node], aggregates: Sequence[Node]) -> bool:
    grouped = {
        a.expr_id for e in grouping if e.cls == "AttributeReference" and (a := e.attribute())
    }
    return all((a := e.attribute()) is not None and a.expr_id in grouped for e in aggregates)


def _leaf_output(node: Node) -> list[Attribute]:
    attrs = [e.attribute() for e in node.expressions("output")]
    if not attrs:
        attrs = [e.attribute() for k in ("dataCols", "partitionCols") for e in node.expressions(k)]
    return [a for a in attrs if a is not None]


def plan_output(query: Node) -> list[Attribute]:
    """The output attributes of ``query`` (the columns it produces, in order)."""
    return _Tracer().trace(query)[0]


def _ordered(kinds: Iterable[Transformation]) -> list[Transformation]:
    """A field's own transformations: direct ones first, as the official integration lists."""
    return sorted(set(kinds), key=lambda t: (t.type != DIRECT, _SUBTYPE_ORDER.get(t.subtype, 9), t))


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

    result = ColumnLineage()
    for _, sources in sorted(tracer.dataset_level, key=lambda entry: entry[0]):
        for column, kinds in sorted(resolve(sources).items()):
            known = result.dataset.setdefault(column, [])
            known.extend(kind for kind in _ordered(kinds) if kind not in known)
    names = list(output_names) if output_names else [a.name for a in outputs]
    for name, attr in zip(names, outputs, strict=False):
        inputs = resolve(lineage.get(attr.expr_id, {}))
        if inputs:
            result.fields[name] = {
                column: _ordered(kinds) for column, kinds in sorted(inputs.items())
            }
    return result
