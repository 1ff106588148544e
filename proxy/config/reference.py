"""The config models, described: JSON Schemas for editors and a Markdown reference.

Both are generated from the pydantic models that load config.yaml
(:class:`~proxy.config.settings.ProxyConfig`) and rules files
(:class:`~routing_rules.schema.RulesFile`), so they cannot drift from what the loader
accepts; the committed copies (``schemas/*.schema.json``, ``docs/reference/configuration.md``) are
checked against a fresh generation by the tests, and ``scripts/config_docs.sh`` rewrites
them.

A field's description is its ``Field(description=...)``, else the comment written right
above the field in its model (or at the end of its line) — the comments the code already
carries, so each description has one home, next to the field it describes.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
import typing
from collections.abc import Iterator
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any, Literal

import annotated_types
import orjson
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from proxy.config.settings import ProxyConfig
from routing_rules.schema import RulesFile

__all__ = ["SCHEMAS", "SCHEMA_FILES", "config_reference", "json_schema"]

# The documents a schema describes, and the file each is committed as.
SCHEMAS: dict[str, type[BaseModel]] = {"config": ProxyConfig, "rules": RulesFile}
SCHEMA_FILES = {name: Path("schemas") / f"{name}.schema.json" for name in SCHEMAS}
_TITLES = {"config": "config.yaml", "rules": "a rules file (routing.rules)"}


def json_schema(name: Literal["config", "rules"] | str) -> str:
    """The JSON Schema (draft 2020-12) of ``config`` or ``rules``, as indented JSON."""
    model = SCHEMAS[name]
    schema = model.model_json_schema(by_alias=True)
    for cls in _models(model):
        target = schema if cls is model else schema.get("$defs", {}).get(cls.__name__)
        if target is None:
            continue
        properties = target.get("properties", {})
        for field_name, field in cls.model_fields.items():
            entry = properties.get(field.alias or field_name)
            description = _description(cls, field_name, field)
            if entry is not None and description and "description" not in entry:
                entry["description"] = description
    document = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"lineage-proxy: {_TITLES[name]}",
        **{k: v for k, v in schema.items() if k != "title"},
    }
    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def config_reference() -> str:
    """Markdown: every key of config.yaml and of a rules file, with type, default and
    description, one table per section."""
    out = [
        "# Configuration reference",
        "",
        "<!-- Generated from the config models by scripts/config_docs.sh; do not edit. -->",
        "",
        "Every key of `config.yaml` and of a rules file (`routing.rules`), from the models",
        "that load them. Unknown keys are errors. Any key of config.yaml can also be set",
        "from the environment: `LINEAGE_PROXY__<SECTION>__<KEY>` (value read as YAML).",
        "Editors that speak the YAML language server complete and check both files with",
        "the JSON Schemas in `schemas/` (see the `# yaml-language-server:` line at the top",
        "of `config.yaml`).",
    ]
    seen: set[type[BaseModel]] = set()
    for name, model in SCHEMAS.items():
        out += ["", f"## {_TITLES[name]}"]
        for cls in _models(model):
            if cls not in seen:
                seen.add(cls)
                out += _section(cls)
    return "\n".join(out) + "\n"


def _section(cls: type[BaseModel]) -> list[str]:
    lines = ["", f"### {cls.__name__}", ""]
    doc = inspect.getdoc(cls)
    if doc and doc != inspect.getdoc(BaseModel) and cls.__doc__:
        lines += [" ".join(doc.split("\n\n")[0].split()).replace("``", "`"), ""]
    lines += ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    for field_name, field in cls.model_fields.items():
        key = field.alias or field_name
        description = _description(cls, field_name, field) or ""
        lines.append(
            f"| `{key}` | {_cell(_type_name(field.annotation, field.metadata))} "
            f"| {_cell(_default(field))} | {_cell(description)} |"
        )
    return lines


def _cell(text: str) -> str:
    """Table-cell safe: ``|`` escaped, and ``<name>`` not taken for an HTML tag."""
    text = text.replace("|", "\\|").replace("\n", " ")
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return "(section defaults)"
    return "`" + orjson.dumps(value, default=_plain).decode() + "`"


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Enum):
        return value.value
    raise TypeError


def _type_name(annotation: Any, metadata: list[Any] | None = None) -> str:
    """A reader's name for a type: ``int (≥ 0, ≤ 65535)``, ``list of str``,
    ``"repair" | "strict"``, a link to a section for a model."""
    constraints = [_constraint(m) for m in metadata or []]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0], [*args[1:], *(metadata or [])])
    if origin is Literal:
        name = " | ".join(f"`{orjson.dumps(a, default=_plain).decode()}`" for a in args)
    elif origin in (typing.Union, types.UnionType):
        members = [_type_name(a) for a in args if a is not type(None)]
        if type(None) in args:
            members.append("null")
        name = " | ".join(dict.fromkeys(members))
    elif origin in (list, tuple, set, frozenset):
        name = f"list of {_grouped(_type_name(args[0]))}" if args else "list"
    elif origin is dict:
        name = f"map of {_grouped(_type_name(args[1]))}" if args else "map"
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        name = f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    elif isinstance(annotation, type) and issubclass(annotation, Enum):
        name = " | ".join(f"`{member.value}`" for member in annotation)
    elif isinstance(annotation, type):
        name = _SIMPLE_TYPES.get(annotation, annotation.__name__)
    elif annotation is Any:
        name = "any"
    else:
        name = str(annotation).replace("typing.", "")
    shown = [c for c in constraints if c]
    return f"{name} ({', '.join(shown)})" if shown else name


_SIMPLE_TYPES = {
    Path: "path",
    str: "string",
    bool: "bool",
    int: "int",
    float: "number",
    SecretStr: "string (secret)",
}


def _grouped(name: str) -> str:
    """``a | b`` inside ``list of …``: parenthesised, so that it reads as one type."""
    return f"({name})" if " | " in name else name


def _constraint(meta: Any) -> str:
    symbols = {
        annotated_types.Gt: ("> ", "gt"),
        annotated_types.Ge: ("≥ ", "ge"),
        annotated_types.Lt: ("< ", "lt"),
        annotated_types.Le: ("≤ ", "le"),
        annotated_types.MinLen: ("at least ", "min_length"),
        annotated_types.MaxLen: ("at most ", "max_length"),
    }
    for kind, (symbol, attribute) in symbols.items():
        if isinstance(meta, kind):
            return f"{symbol}{getattr(meta, attribute)}"
    return ""


def _models(root: type[BaseModel]) -> Iterator[type[BaseModel]]:
    """``root`` and every model its fields reach, depth first, each once."""
    seen: set[type[BaseModel]] = set()

    def visit(cls: type[BaseModel]) -> Iterator[type[BaseModel]]:
        if cls in seen:
            return
        seen.add(cls)
        yield cls
        for field in cls.model_fields.values():
            for found in _models_in(field.annotation):
                yield from visit(found)

    yield from visit(root)


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def _description(cls: type[BaseModel], name: str, field: FieldInfo) -> str | None:
    if field.description:
        return field.description
    for owner in cls.__mro__:  # a field may be declared by a base model
        if isinstance(owner, type) and issubclass(owner, BaseModel) and name in _comments(owner):
            return _comments(owner)[name]
    return None


@cache
def _comments(cls: type) -> dict[str, str]:
    """Field name → the comment block right above its declaration in ``cls``'s source,
    or the comment at the end of its line."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    tree = ast.parse(source)
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    found: dict[str, str] = {}
    for node in body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above: list[str] = []
        row = node.lineno - 2
        while row >= 0 and lines[row].strip().startswith("#"):
            above.insert(0, lines[row].strip().lstrip("#").strip())
            row -= 1
        inline = lines[node.lineno - 1].partition("  # ")[2].strip()
        text = " ".join(part for part in (*above, inline) if part)
        if text:
            found[node.target.id] = text
    return found
