"""Building blocks shared by the facet models: containers, strictness, tagged unions.

Facet bodies are ``TypedDict``s validated by pydantic in strict mode: a JSON Schema
``"type": "string"`` must not accept ``5``, and an optional property that is present
must have the right type (``null`` is not "absent"). ``total=False`` plus ``Required``
says exactly what the schema's ``required`` list says. Unknown properties are ignored
(the spec schemas allow them) unless a model says ``extra="forbid"``.

The facet base fields ``_producer`` / ``_schemaURL`` / ``_deleted`` are not part of
these models: the validator checks them once for every facet, known or custom.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, NamedTuple

from pydantic import BeforeValidator, ConfigDict, Discriminator, Tag, with_config

from proxy.validation.issues import TAG_MARK

__all__ = [
    "Container",
    "JsonInt",
    "SpecFacet",
    "forbid_extra",
    "spec_object",
    "tag",
    "type_discriminator",
]

spec_object = with_config(ConfigDict(strict=True, extra="ignore"))
"""Decorator for every spec TypedDict: strict JSON types, extra properties allowed."""

forbid_extra = with_config(ConfigDict(strict=True, extra="forbid"))
"""For the few spec objects with ``additionalProperties: false``."""


def _integral(value: Any) -> Any:
    """A float with no fractional part (``1000.0``, ``1E3``) as the integer it is:
    JSON Schema's ``integer`` is any number with a zero fractional part. Anything else
    goes on to the strict check unchanged (``1.5`` and ``true`` stay refused)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


JsonInt = Annotated[int, BeforeValidator(_integral)]
"""A spec ``"type": "integer"`` property: an int, or a float whose value is whole."""


class Container(StrEnum):
    """Where a facet sits in an event; each facet type belongs to one container."""

    RUN = "run facets"
    JOB = "job facets"
    DATASET = "dataset facets"
    INPUT = "inputFacets"
    OUTPUT = "outputFacets"


class SpecFacet(NamedTuple):
    """A facet defined by the spec: its name, conventional key, container and model."""

    name: str
    key: str
    container: Container
    model: Any


def _type_of(value: Any) -> str | None:
    if isinstance(value, dict) and "type" in value:
        return TAG_MARK + str(value["type"])
    return None


def type_discriminator() -> Discriminator:
    """Discriminate a union by its members' ``type`` constant (spec ``oneOf`` + ``const``)."""
    return Discriminator(_type_of)


def tag(type_value: str) -> Tag:
    """The union tag for members whose ``type`` is ``type_value`` (marked, see issues.py)."""
    return Tag(TAG_MARK + type_value)
