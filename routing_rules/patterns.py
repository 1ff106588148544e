"""String patterns of the rule language, compiled once into plain predicates.

In a rules file a pattern is written as

- a string: a shell-style glob (``team-a.*``, ``s3://bucket/*``); without ``* ? [``
  it is an exact comparison, which is also the fast path;
- ``{regex: "..."}``: a Python regular expression, searched (anchor with ``^``/``$``);
- ``{glob: "..."}``: the same as a bare string, for symmetry;
- a list of the above: any of them.

Values that are not strings never match a pattern (no implicit ``str()``).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator

from proxy.support.strict import StrictModel

__all__ = [
    "GlobPattern",
    "PatternSpec",
    "Regex",
    "RegexPattern",
    "StringPredicate",
    "compile_pattern",
    "compiled_glob",
    "is_literal",
]

StringPredicate = Callable[[Any], bool]

_GLOB_CHARS = frozenset("*?[")


def _valid_regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise ValueError(f"invalid regular expression: {exc}") from None
    return text


# A string that must compile as a regular expression.
Regex = Annotated[str, AfterValidator(_valid_regex)]


class RegexPattern(StrictModel):
    # A Python regular expression that must match the whole value.
    regex: Regex


class GlobPattern(StrictModel):
    # A glob (*, ?, [..]) that must match the whole value.
    glob: str


PatternSpec = str | RegexPattern | GlobPattern | list[str | RegexPattern | GlobPattern]


def is_literal(glob: str) -> bool:
    return not (_GLOB_CHARS & set(glob))


def compiled_glob(glob: str) -> re.Pattern[str]:
    """A glob as a compiled regex (case-sensitive on every platform, unlike fnmatch)."""
    return re.compile(fnmatch.translate(glob))


def _one(spec: str | RegexPattern | GlobPattern) -> StringPredicate:
    if isinstance(spec, RegexPattern):
        search = re.compile(spec.regex).search
        return lambda value: isinstance(value, str) and search(value) is not None
    glob = spec.glob if isinstance(spec, GlobPattern) else spec
    if is_literal(glob):
        return lambda value: value == glob and isinstance(value, str)
    match = compiled_glob(glob).match
    return lambda value: isinstance(value, str) and match(value) is not None


def compile_pattern(spec: PatternSpec) -> StringPredicate:
    """One predicate for a pattern spec; a list becomes "any of"."""
    if not isinstance(spec, list):
        return _one(spec)
    literals = frozenset(s for s in spec if isinstance(s, str) and is_literal(s)) | frozenset(
        s.glob for s in spec if isinstance(s, GlobPattern) and is_literal(s.glob)
    )
    others = tuple(
        _one(s)
        for s in spec
        if not (isinstance(s, str) and is_literal(s))
        and not (isinstance(s, GlobPattern) and is_literal(s.glob))
    )
    if not others:
        # Many exact names (a list of team namespaces) become one set lookup.
        return lambda value: isinstance(value, str) and value in literals
    return lambda value: (
        (isinstance(value, str) and value in literals) or any(p(value) for p in others)
    )
