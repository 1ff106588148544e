"""Load YAML while remembering where every key stands, so errors can say file and line.

Both config.yaml and the routing rules files are edited by hand; a typo must fail at
start with ``file:line: key: reason``, not with a bare pydantic dump. This module is
the one place that knows how to get from a pydantic error location back to a line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

__all__ = [
    "ConfigError",
    "YamlDocument",
    "format_validation_error",
    "load_yaml_document",
    "set_path",
]

Path_ = tuple[str | int, ...]


class ConfigError(Exception):
    """A configuration or rules file that cannot be used; the message names file, line, key."""


@dataclass(slots=True)
class YamlDocument:
    """Plain data from a YAML file plus the line (1-based) of every mapping key / item."""

    data: Any
    source: str
    lines: dict[Path_, int] = field(default_factory=dict)
    # Paths set from somewhere other than the file (e.g. an environment variable).
    overrides: dict[Path_, str] = field(default_factory=dict)

    def where(self, path: Path_) -> str:
        """Describe where the value at ``path`` (or its nearest known parent) came from."""
        for end in range(len(path), -1, -1):
            prefix = path[:end]
            if prefix in self.overrides:
                return f"environment {self.overrides[prefix]}"
            if prefix in self.lines:
                return f"{self.source}:{self.lines[prefix]}"
        return self.source


def _to_data(node: yaml.Node, path: Path_, lines: dict[Path_, int], source: str) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _scalar(key_node)
            if key in result:
                # PyYAML would silently keep the last one; a hand-edited file means a mistake.
                line = key_node.start_mark.line + 1
                raise ConfigError(f"{source}:{line}: duplicate key {key!r}")
            lines[(*path, key)] = key_node.start_mark.line + 1
            result[key] = _to_data(value_node, (*path, key), lines, source)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_to_data(item, (*path, i), lines, source) for i, item in enumerate(node.value)]
    return _scalar(node)


def _scalar(node: yaml.Node) -> Any:
    """The value of a scalar node as ``yaml.safe_load`` gives it: an empty one
    (``host:``, or ``tls:`` whose children are all commented out) is None, which the
    models then refuse or take, with the key's line, like any other value. (Serializing
    the node to load it again fails on an empty one, with a parser traceback.)"""
    return yaml.SafeLoader("").construct_object(node, deep=True)


def load_yaml_document(path: Path | str, text: str | None = None) -> YamlDocument:
    """Parse ``path`` (or ``text`` named as ``path``) into data with line numbers."""
    source = str(path)
    if text is None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{source}: cannot read: {exc.strerror or exc}") from exc
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{source}{line}: invalid YAML: {exc.problem}") from exc
    lines: dict[Path_, int] = {}
    data = {} if node is None else _to_data(node, (), lines, source)
    return YamlDocument(data=data, source=source, lines=lines)


def format_validation_error(doc: YamlDocument, error: ValidationError) -> str:
    """One line per problem: ``where: dotted.key: message``."""
    out = []
    for item in error.errors(include_url=False):
        loc = _document_loc(doc, tuple(item["loc"]), missing=item["type"] == "missing")
        dotted = ".".join(str(p) for p in loc) or "(top level)"
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = "unknown key (check the spelling; see config.yaml for the known keys)"
        out.append(f"{doc.where(loc)}: {dotted}: {message}")
    return "\n".join(out)


def _document_loc(doc: YamlDocument, loc: Path_, *, missing: bool) -> Path_:
    """Drop the parts pydantic adds that are not in the file (a tagged union's tag, as in
    ``destinations.x.kafka.key``), so the line and the dotted key are the user's own.
    A missing key is kept: it is what the message is about."""
    kept: Path_ = ()
    for index, part in enumerate(loc):
        named = missing and index == len(loc) - 1
        if named or (*kept, part) in doc.lines or (*kept, part) in doc.overrides:
            kept = (*kept, part)
    return kept


def set_path(data: dict[str, Any], path: Path_, value: Any) -> None:
    """Set ``data[p0][p1]... = value``, creating mappings on the way."""
    node: Any = data
    for part in path[:-1]:
        child = node.get(part) if isinstance(node, Mapping) else None
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value
