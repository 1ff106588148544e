"""Validation issues and their JSON pointers.

An issue names the place in the event (an RFC 6901 JSON pointer, ``""`` for the whole
document) and says in a few words what is wrong there. This module also turns
pydantic's error records into such issues, so every model in ``proxy.validation``
reports in the same voice.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from proxy.validation.formats import PATTERN_MESSAGES

__all__ = ["TAG_MARK", "ValidationIssue", "escape_pointer_token", "issues_from_pydantic", "pointer"]

# Union members are tagged with this prefix (see facets/base.py) so their tag, which
# pydantic puts into ``loc``, can be told apart from a real key and dropped.
TAG_MARK = "\x00"


class ValidationIssue(NamedTuple):
    """One problem in an event: where (JSON pointer) and what (short human message)."""

    pointer: str
    message: str


def escape_pointer_token(token: str | int) -> str:
    """Escape one reference token per RFC 6901 (``~`` → ``~0``, ``/`` → ``~1``)."""
    text = str(token)
    if "~" in text or "/" in text:
        return text.replace("~", "~0").replace("/", "~1")
    return text


def pointer(prefix: str, tokens: Iterable[str | int]) -> str:
    """``prefix`` (already a pointer) extended by the escaped ``tokens``."""
    return prefix + "".join(
        "/" + escape_pointer_token(token)
        for token in tokens
        if not (isinstance(token, str) and token.startswith(TAG_MARK))
    )


_TYPE_MESSAGES = {
    "missing": "field required",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "bool_type": "must be a boolean",
    "list_type": "must be an array",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "typed_dict_type": "must be an object",
    "extra_forbidden": "unexpected property",
    "union_tag_not_found": "field required",
    "recursion_loop": "nested too deeply",
    "recursion_depth_exceeded": "nested too deeply",
}


def _message(error: ErrorDetails) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind in _TYPE_MESSAGES:
        return _TYPE_MESSAGES[kind]
    if kind == "literal_error":
        # ctx "'A', 'B' or 'C'" → "A, B, C"
        expected = str(ctx.get("expected", "")).replace("'", "").replace(" or ", ", ")
        return f"must be one of {expected}"
    if kind == "union_tag_invalid":
        expected = str(ctx.get("expected_tags", "")).replace("'", "").replace(TAG_MARK, "")
        expected = expected.replace(repr(TAG_MARK)[1:-1], "")
        return f"must be one of {expected.replace(' or ', ', ')}"
    if kind == "string_pattern_mismatch":
        return PATTERN_MESSAGES.get(str(ctx.get("pattern")), "does not match the expected form")
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}"
    return str(error.get("msg", kind))


def issues_from_pydantic(error: ValidationError, prefix: str) -> list[ValidationIssue]:
    """Translate a pydantic ``ValidationError`` into issues below ``prefix``."""
    issues = []
    for record in error.errors(include_url=False, include_input=False):
        loc = record["loc"]
        if record["type"] in ("union_tag_not_found", "union_tag_invalid"):
            # Every tagged union in the spec models is tagged by its "type" property.
            loc = (*loc, "type")
        issues.append(ValidationIssue(pointer(prefix, loc), _message(record)))
    return issues
