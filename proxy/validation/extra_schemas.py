"""Facet JSON Schemas beyond the spec's, compiled once with jsonschema-rs.

Two sources: :data:`OWN_FACET_SCHEMAS`, the schemas of the custom facets this project
itself emits (registered by default, so strict mode accepts our own Spark emitter), and
the user's ``extra_schema_dir``. Each ``*.json`` file in a directory registers a facet
schema under its ``$id`` and its file name. A facet whose ``_schemaURL`` points at that
file is checked against the ``#/$defs/X`` / ``#/definitions/X`` definition named by the
fragment, or against the whole document when there is none. Every definition is
compiled up front, never per event.

User schemas usually ``$ref`` the core base types
(``https://openlineage.io/spec/<version>/OpenLineage.json#/$defs/RunFacet``). Those are
served from ``CORE_FACET_BASES`` below (our own rendering of the spec's base facet
types), so compiling never touches the network; any other remote ``$ref`` is an error
at start-up, not a fetch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NamedTuple

import jsonschema_rs

from proxy.validation.issues import ValidationIssue, pointer

__all__ = [
    "OWN_FACET_SCHEMAS",
    "ExtraSchemaError",
    "ExtraSchemas",
    "issues_from_schema",
    "split_schema_url",
]

OWN_FACET_SCHEMAS = Path(__file__).parent / "schemas"
"""Schemas of the facets our own components emit; their ``_schemaURL`` names these files."""

_URI = {"type": "string", "format": "uri"}
_BASE = {"$ref": "#/$defs/BaseFacet"}
_DELETABLE = {"type": "object", "properties": {"_deleted": {"type": "boolean"}}}
CORE_FACET_BASES: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$defs": {
        "BaseFacet": {
            "type": "object",
            "properties": {"_producer": _URI, "_schemaURL": _URI},
            "required": ["_producer", "_schemaURL"],
        },
        "RunFacet": {"type": "object", "allOf": [_BASE]},
        "JobFacet": {"type": "object", "allOf": [_BASE, _DELETABLE]},
        "DatasetFacet": {"type": "object", "allOf": [_BASE, _DELETABLE]},
        "InputDatasetFacet": {"type": "object", "allOf": [_BASE]},
        "OutputDatasetFacet": {"type": "object", "allOf": [_BASE]},
    },
}
_CORE_URL = re.compile(r"https?://openlineage\.io/spec/[0-9-]+/OpenLineage\.json")
_FRAGMENT = re.compile(r"/(?:\$defs|definitions)/([^/]+)")


class ExtraSchemaError(ValueError):
    """A schema in ``extra_schema_dir`` cannot be loaded or compiled (carries the file)."""


def split_schema_url(url: str) -> tuple[str, str, str | None]:
    """``(document URL, file stem, definition name or None)`` of a ``_schemaURL``."""
    document, _, fragment = url.partition("#")
    stem = document.rsplit("/", 1)[-1]
    if stem.endswith(".json"):
        stem = stem[: -len(".json")]
    match = _FRAGMENT.fullmatch(fragment) if fragment else None
    return document, stem, match[1] if match else None


def _retrieve(uri: str) -> Any:
    if _CORE_URL.fullmatch(uri.partition("#")[0]):
        return CORE_FACET_BASES
    raise ValueError(f"remote $ref {uri} is not served; put that schema in the directory")


class _Document(NamedTuple):
    whole: Any
    definitions: dict[str, Any]


class ExtraSchemas:
    """The compiled user schemas, looked up from a facet's ``_schemaURL``."""

    def __init__(self, *directories: Path | None) -> None:
        """Load every ``*.json`` of ``directories`` in order (a later file of the same
        name or ``$id`` wins, so a user can replace one of ours)."""
        self._by_id: dict[str, _Document] = {}
        self._by_file: dict[str, _Document] = {}
        self._names: set[str] = set()
        for directory in directories:
            if directory is not None:
                for path in sorted(Path(directory).glob("*.json")):
                    self._load(path)

    def _load(self, path: Path) -> None:
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(schema, dict):
                raise ValueError("a JSON Schema document must be an object")
            document = _Document(self._compile(schema), {})
            for section in ("$defs", "definitions"):
                for name in schema.get(section) or {}:
                    # The definition alone, with the document's $defs around it so its
                    # own "#/$defs/…" references still resolve.
                    wrapper = {
                        k: schema[k]
                        for k in ("$schema", "$id", "$defs", "definitions")
                        if k in schema
                    }
                    wrapper["$ref"] = f"#/{section}/{name}"
                    document.definitions[name] = self._compile(wrapper)
                    self._names.add(name)
        except (OSError, ValueError, jsonschema_rs.ReferencingError) as exc:
            raise ExtraSchemaError(f"{path}: {exc}") from exc
        self._by_file[path.name] = document
        self._names.add(path.stem)
        schema_id = schema.get("$id")
        if isinstance(schema_id, str):
            self._by_id[schema_id.partition("#")[0]] = document

    @staticmethod
    def _compile(schema: dict[str, Any]) -> Any:
        return jsonschema_rs.validator_for(schema, validate_formats=True, retriever=_retrieve)

    def names(self) -> frozenset[str]:
        return frozenset(self._names)

    def by_id(self, document_url: str, definition: str | None) -> Any | None:
        """The compiled schema whose ``$id`` is ``document_url``."""
        return self._pick(self._by_id.get(document_url), definition)

    def by_file(self, document_url: str, definition: str | None) -> Any | None:
        """The compiled schema whose file name ends ``document_url``."""
        return self._pick(self._by_file.get(document_url.rsplit("/", 1)[-1]), definition)

    @staticmethod
    def _pick(document: _Document | None, definition: str | None) -> Any | None:
        if document is None:
            return None
        if definition is None:
            return document.whole
        return document.definitions.get(definition)


def issues_from_schema(validator: Any, facet: Any, prefix: str) -> list[ValidationIssue]:
    """Every jsonschema-rs error for ``facet`` as an issue below ``prefix``."""
    return [
        ValidationIssue(pointer(prefix, error.instance_path), error.message)
        for error in validator.iter_errors(facet)
    ]
