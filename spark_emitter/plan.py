"""Spark plans as plain Python trees, parsed from Catalyst's own JSON (``TreeNode.toJSON``).

The listener asks the JVM for a plan's JSON in one py4j call instead of walking the tree
node by node over the socket (hundreds of round trips for an ordinary query). Everything
downstream — column lineage, schemas — works on these trees and needs no JVM, so it is
unit-testable with literal JSON.

Catalyst writes a tree as a pre-order list of nodes, each with ``class`` and
``num-children``; a node's fields that hold expressions are themselves such lists
(``Seq[Expression]`` is a list of lists). Fields that hold a plan outside the children
(``query`` of CREATE TABLE AS SELECT) are lists of plan nodes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Attribute", "Node", "parse_tree", "short_class", "type_name"]


def short_class(name: str) -> str:
    """``org.apache.spark.sql.catalyst.plans.logical.Project`` → ``Project``."""
    return name.rsplit(".", 1)[-1].rstrip("$")


def type_name(data_type: Any) -> str:
    """Spark's name for a type as its JSON gives it: ``"integer"``, or ``{"type": "struct"}``."""
    if isinstance(data_type, str):
        return data_type
    if isinstance(data_type, dict):
        return str(data_type.get("type", "struct"))
    return "unknown"


@dataclass(frozen=True)
class Attribute:
    """A column as Catalyst names it: the ``exprId`` is what ties uses to definitions."""

    expr_id: int
    name: str
    data_type: Any


@dataclass
class Node:
    """One plan or expression node: short class name, raw fields, parsed children."""

    cls: str
    fields: dict[str, Any]
    children: list[Node] = field(default_factory=list)

    def walk(self) -> Iterator[Node]:
        """This node and all its descendants, pre-order (children only, not fields)."""
        yield self
        for child in self.children:
            yield from child.walk()

    def attribute(self) -> Attribute | None:
        """The attribute this node *is* (AttributeReference) or *defines* (Alias)."""
        expr_id = self.fields.get("exprId")
        if not isinstance(expr_id, dict) or "id" not in expr_id:
            return None
        data_type = self.fields.get("dataType")
        if data_type is None and self.children:
            data_type = self.children[0].fields.get("dataType")
        return Attribute(int(expr_id["id"]), str(self.fields.get("name", "")), data_type)

    def expressions(self, key: str) -> list[Node]:
        """The expression(s) held in field ``key``: one tree, or one per list element."""
        value = self.fields.get(key)
        if not isinstance(value, list) or not value:
            return []
        if all(isinstance(item, list) for item in value):
            return [tree for item in value if item for tree in [parse_tree(item)]]
        if isinstance(value[0], dict) and "class" in value[0]:
            return [parse_tree(value)]
        return []

    def plan_field(self, key: str) -> Node | None:
        """A plan held in field ``key``: a child index, or a plan serialised in place."""
        value = self.fields.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return self.children[value] if value < len(self.children) else None
        if isinstance(value, list) and value and isinstance(value[0], dict):
            return parse_tree(value)
        return None

    def references(self) -> list[Attribute]:
        """Every attribute referenced anywhere in this expression tree."""
        found: list[Attribute] = []
        for node in self.walk():
            if node.cls == "AttributeReference" and (attr := node.attribute()):
                found.append(attr)
        return found


def parse_tree(nodes: list[dict[str, Any]]) -> Node:
    """Rebuild a tree from Catalyst's pre-order node list."""
    position = 0

    def build() -> Node:
        nonlocal position
        raw = nodes[position]
        position += 1
        count = int(raw.get("num-children", 0))
        fields = {k: v for k, v in raw.items() if k not in ("class", "num-children")}
        node = Node(short_class(str(raw.get("class", "?"))), fields)
        node.children = [build() for _ in range(count)]
        return node

    return build()
