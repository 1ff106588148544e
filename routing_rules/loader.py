"""Read a rules file: YAML with line numbers → checked :class:`RulesFile`, or an error
naming file, line and reason (``rules.yaml:12: rules.2.to.0: unknown destination``).

Used at start, on every reload and by ``lineage-proxy rules check|test``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from proxy.support.yaml_source import (
    ConfigError,
    YamlDocument,
    format_validation_error,
    load_yaml_document,
)
from routing_rules.schema import RulesFile, rule_names

__all__ = ["BUILTIN_RULES", "load_rules_file"]

# What the proxy routes by when config.yaml names no rules file.
BUILTIN_RULES = Path(__file__).resolve().parent / "default.yaml"


def _reference_errors(doc: YamlDocument, rules: RulesFile) -> list[str]:
    declared = set(rules.destinations)
    known = ", ".join(sorted(declared)) or "none declared"
    errors = []
    routes: list[tuple[tuple[str | int, ...], list[str]]] = [
        (("rules", i, "to"), rule.to) for i, rule in enumerate(rules.rules)
    ]
    routes.append((("default", "to"), rules.default.to))
    if rules.rejected is not None:
        routes.append((("rejected", "to"), rules.rejected.to))
    for path, names in routes:
        for j, name in enumerate(names):
            if name not in declared:
                where = doc.where((*path, j))
                dotted = ".".join(str(p) for p in (*path, j))
                errors.append(f"{where}: {dotted}: unknown destination {name!r} ({known})")
    seen: dict[str, int] = {}
    for i, name in enumerate(rule_names(rules.rules)):
        if name in seen:
            errors.append(
                f"{doc.where(('rules', i, 'name'))}: rules.{i}.name: {name!r} is also the "
                f"name of rule {seen[name]}; names must be unique (they label the metrics)"
            )
        seen.setdefault(name, i)
    return errors


def load_rules_file(path: Path | str, text: str | None = None) -> RulesFile:
    """Parse and check ``path`` (or ``text`` named as it); raise :class:`ConfigError`."""
    doc = load_yaml_document(path, text)
    if not isinstance(doc.data, dict):
        raise ConfigError(f"{doc.source}:1: a rules file is a mapping with version: 1")
    try:
        rules = RulesFile.model_validate(doc.data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(doc, exc, RulesFile)) from None
    errors = _reference_errors(doc, rules)
    if errors:
        raise ConfigError("\n".join(errors))
    return rules
