"""Load YAML while remembering where every key stands, so errors can say file and line.

Both config.yaml and the routing rules files are edited by hand; a typo must fail at
start with ``file:line: key: reason``, not with a bare pydantic dump. This module is
the one place that knows how to get from a pydantic error location back to a line.
"""

from __future__ import annotations

import difflib
import functools
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

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


def format_validation_error(
    doc: YamlDocument, error: ValidationError, model: type[BaseModel] | None = None
) -> str:
    """One line per problem: ``where: dotted.key: message``; an unknown key gets the
    closest key ``model`` (the file's top-level model) knows, when one is close."""
    out = []
    for item in _closest_branches(doc, error.errors(include_url=False)):
        loc = _document_loc(doc, tuple(item["loc"]), missing=item["type"] == "missing")
        dotted = ".".join(str(p) for p in loc) or "(top level)"
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = _unknown_key(str(loc[-1]) if loc else "", model)
        out.append(f"{doc.where(loc)}: {dotted}: {message}")
    return "\n".join(out)


def _closest_branches(doc: YamlDocument, items: list[Any]) -> list[Any]:
    """Of a union's branches (``{regex: ...}``, ``{glob: ...}``, a string, a list), the
    errors of the branch the user meant: pydantic reports why every branch failed, and
    the others' reasons mislead (a bad regex gave four lines: "should be a valid
    string", "glob: Field required", ...). The branch meant is the one whose own check
    failed (a value error), else those of the value's shape (a mapping is no string)."""
    branches: dict[Path_, dict[str, list[Any]]] = {}
    for item in items:
        loc = tuple(item["loc"])
        for index, part in enumerate(loc):
            if isinstance(part, str) and loc[: index + 1] not in doc.lines and index:
                if loc[:index] in doc.lines and part not in _keys_at(doc, loc[:index]):
                    branches.setdefault(loc[:index], {}).setdefault(part, []).append(item)
                break
    dropped: set[int] = set()
    for by_branch in branches.values():
        if len(by_branch) < 2:
            continue
        meant = [b for b, errs in by_branch.items() if any(_is_value_error(e) for e in errs)]
        if not meant:
            meant = [b for b, errs in by_branch.items() if not all(map(_is_shape_error, errs))]
        for branch, errs in by_branch.items():
            if meant and branch not in meant:
                dropped.update(id(e) for e in errs)
    return [item for item in items if id(item) not in dropped]


def _is_value_error(item: Any) -> bool:
    return bool(item["type"] == "value_error")


def _is_shape_error(item: Any) -> bool:
    """The value is not of the branch's kind at all (a mapping for a string, ...)."""
    return str(item["type"]).endswith("_type")


def _keys_at(doc: YamlDocument, path: Path_) -> set[Any]:
    node: Any = doc.data
    for part in path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return set()
    return set(node) if isinstance(node, dict) else set()


def _unknown_key(key: str, model: type[BaseModel] | None) -> str:
    close = difflib.get_close_matches(key, _known_keys(model), n=1) if model else []
    if close:
        return f"unknown key (did you mean {close[0]!r}?)"
    return "unknown key (check the spelling; `lineage-proxy schema` lists the known keys)"


@functools.cache
def _known_keys(model: type[BaseModel]) -> tuple[str, ...]:
    """Every key any model reachable from ``model`` takes (its fields and their aliases)."""
    keys: set[str] = set()
    seen: set[type[BaseModel]] = set()
    pending = [model]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        for name, info in current.model_fields.items():
            keys.add(info.alias or name)
            pending.extend(_models_in(info.annotation))
    return tuple(sorted(keys))


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    """The models an annotation holds: itself, or inside Optional, unions, lists, dicts."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for argument in typing.get_args(annotation):
        yield from _models_in(argument)


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
