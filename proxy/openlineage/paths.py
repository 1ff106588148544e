"""Dotted field paths into an event, parsed once and then read or rewritten many times.

Routing rules match on paths (``run.facets.processing_engine.name``), redact them
(``job.facets.sql.query``) and Kafka key templates read them (``{job.namespace}``); all
of them go through :class:`FieldPath`, so what a path means is written once.

Syntax: segments separated by dots. A segment that is a whole number also indexes a
list (``inputs.0.name``); ``*`` stands for every value of a mapping or every item of a
list (``inputs.*.namespace``). Segments are matched literally otherwise, so a key that
itself holds a dot cannot be addressed (OpenLineage facet names do not).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["MISSING", "FieldPath"]

WILDCARD = "*"


class _Missing:
    """The value of a path that leads nowhere (distinct from a JSON null)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def _child(node: Any, segment: str) -> Any:
    if isinstance(node, dict):
        return node.get(segment, MISSING)
    if isinstance(node, list) and segment.isdigit():
        index = int(segment)
        return node[index] if index < len(node) else MISSING
    return MISSING


def _children(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return list(node.values())
    if isinstance(node, list):
        return node
    return []


class FieldPath:
    """A pre-split dotted path; ``values(event)`` yields what it points at."""

    __slots__ = ("has_wildcard", "segments", "text")

    def __init__(self, text: str) -> None:
        segments = tuple(text.split("."))
        if not text or any(not s for s in segments):
            raise ValueError(f"field path {text!r} has an empty segment")
        self.text = text
        self.segments = segments
        self.has_wildcard = WILDCARD in segments

    @classmethod
    def from_pointer(cls, pointer: str) -> FieldPath:
        """The path a JSON pointer (RFC 6901, ``/run/facets/a.b``) names: its tokens are
        taken literally (a dot or ``*`` in a token is part of the key)."""
        if pointer and not pointer.startswith("/"):
            raise ValueError(f"JSON pointer {pointer!r} must start with '/'")
        path = cls.__new__(cls)
        path.text = pointer
        path.segments = tuple(
            token.replace("~1", "/").replace("~0", "~") for token in pointer.split("/")[1:]
        )
        path.has_wildcard = False
        return path

    def __repr__(self) -> str:
        return f"FieldPath({self.text!r})"

    def get(self, event: Any) -> Any:
        """The single value at the path, or :data:`MISSING` (first match for wildcards)."""
        if self.has_wildcard:
            return next(self.values(event), MISSING)
        node = event
        for segment in self.segments:  # inlined _child: this runs per rule per event
            if isinstance(node, dict):
                node = node.get(segment, MISSING)
                if node is MISSING:
                    return MISSING
            elif isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
                node = node[int(segment)]
            else:
                return MISSING
        return node

    def values(self, event: Any) -> Iterator[Any]:
        """Every value the path points at (none when it leads nowhere)."""
        yield from self._walk(event, 0)

    def _walk(self, node: Any, depth: int) -> Iterator[Any]:
        if depth == len(self.segments):
            yield node
            return
        segment = self.segments[depth]
        if segment == WILDCARD:
            for child in _children(node):
                yield from self._walk(child, depth + 1)
            return
        child = _child(node, segment)
        if child is not MISSING:
            yield from self._walk(child, depth + 1)

    def replace(self, event: Any, value: Any) -> int:
        """Set every existing value at the path to ``value``; return how many were set.

        Never creates anything: a path that leads nowhere changes nothing.
        """
        return self._replace(event, 0, value)

    def _replace(self, node: Any, depth: int, value: Any) -> int:
        segment = self.segments[depth]
        last = depth == len(self.segments) - 1
        if segment == WILDCARD:
            keys: list[Any] = (
                (list(node) if isinstance(node, dict) else list(range(len(node))))
                if isinstance(node, dict | list)
                else []
            )
        elif isinstance(node, dict) and segment in node:
            keys = [segment]
        elif isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
            keys = [int(segment)]
        else:
            return 0
        if last:
            for key in keys:
                node[key] = value
            return len(keys)
        return sum(self._replace(node[key], depth + 1, value) for key in keys)
