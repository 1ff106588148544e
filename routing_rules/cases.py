"""Rules unit tests: ``lineage-proxy rules test RULES --cases FILE``.

A cases file lists events and what the rules must do with them, so a rules change that
sends an event elsewhere fails in CI instead of in production::

    cases:
      - name: payments jobs go to the payments topic
        event: events/payments-start.json     # a file (relative to the cases file) ...
        expect:
          destinations: [payments]            # names, in any order
          fields:
            job.namespace: payments           # a dotted path, as in rules
            /run/facets/parent: null          # or a JSON pointer
      - name: RUNNING events are dropped
        event: {eventType: RUNNING, ...}      # ... or the event inline
        expect: {dropped: true}

Only what ``expect`` names is checked; ``fields`` read the event as it would be sent
(after transforms and repairs). ``rejected`` is whether the event fails validation (it
then goes to the rejected route). Cases run in order through one dry run
(:mod:`routing_rules.dry_run`), sharing its state like the events of one ``rules test``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import orjson
from pydantic import AfterValidator, Field, ValidationError

from proxy.openlineage.paths import MISSING, FieldPath
from proxy.support.strict import StrictModel
from proxy.support.yaml_source import (
    ConfigError,
    YamlDocument,
    format_validation_error,
    load_yaml_document,
)
from routing_rules.dry_run import DryRun, Outcome
from routing_rules.schema import RulesFile

__all__ = ["Case", "CaseResult", "load_cases", "run_cases"]


def field_path(text: str) -> FieldPath:
    """A JSON pointer when ``text`` starts with ``/``, else a dotted path."""
    return FieldPath.from_pointer(text) if text.startswith("/") else FieldPath(text)


def _valid_path(text: str) -> str:
    field_path(text)  # raises ValueError naming the problem
    return text


class Expect(StrictModel):
    destinations: list[str] | None = None
    fields: dict[Annotated[str, AfterValidator(_valid_path)], Any] = Field(default_factory=dict)
    dropped: bool | None = None
    rejected: bool | None = None


class Case(StrictModel):
    name: Annotated[str, Field(min_length=1)]
    # An event, or the path of a JSON file holding one (relative to the cases file).
    event: dict[str, Any] | str
    expect: Expect


class CasesFile(StrictModel):
    cases: Annotated[list[Case], Field(min_length=1)]


@dataclass(frozen=True, slots=True)
class CaseResult:
    name: str
    differences: list[str]

    @property
    def passed(self) -> bool:
        return not self.differences

    def as_text(self) -> str:
        if self.passed:
            return f"PASS {self.name}"
        return f"FAIL {self.name}: " + "; ".join(self.differences)


def _event_file(doc: YamlDocument, index: int, name: str) -> dict[str, Any]:
    where = doc.where(("cases", index, "event"))
    path = Path(doc.source).parent / name
    try:
        event = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ConfigError(f"{where}: cases.{index}.event: cannot read {path}: {exc}") from None
    if not isinstance(event, dict):
        raise ConfigError(f"{where}: cases.{index}.event: {path} holds no single event object")
    return event


def _problems(doc: YamlDocument, cases: CasesFile, rules: RulesFile) -> list[str]:
    problems = []
    seen: set[str] = set()
    for index, case in enumerate(cases.cases):
        if case.name in seen:
            where = doc.where(("cases", index, "name"))
            problems.append(f"{where}: cases.{index}.name: duplicate case name {case.name!r}")
        seen.add(case.name)
        for position, name in enumerate(case.expect.destinations or ()):
            if name not in rules.destinations:
                loc = ("cases", index, "expect", "destinations", position)
                problems.append(
                    f"{doc.where(loc)}: {'.'.join(map(str, loc))}: unknown destination "
                    f"{name!r} (the rules declare {', '.join(sorted(rules.destinations))})"
                )
    return problems


def load_cases(path: Path | str, rules: RulesFile) -> list[tuple[Case, dict[str, Any]]]:
    """Each case with its event; ConfigError (``file:line: key: reason``) when malformed."""
    doc = load_yaml_document(path)
    try:
        cases = CasesFile.model_validate(doc.data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(doc, exc, CasesFile)) from None
    if problems := _problems(doc, cases, rules):
        raise ConfigError("\n".join(problems))
    return [
        (case, case.event if isinstance(case.event, dict) else _event_file(doc, i, case.event))
        for i, case in enumerate(cases.cases)
    ]


def _json(value: Any) -> str:
    return "(missing)" if value is MISSING else orjson.dumps(value).decode()


def _differences(expect: Expect, outcome: Outcome) -> list[str]:
    out = []
    rejected = bool(outcome.invalid)
    if expect.rejected is not None and expect.rejected != rejected:
        why = f" ({outcome.invalid[0][0] or '/'}: {outcome.invalid[0][1]})" if rejected else ""
        out.append(f"rejected: expected {_json(expect.rejected)}, got {_json(rejected)}{why}")
    dropped = outcome.dropped_by is not None
    if expect.dropped is not None and expect.dropped != dropped:
        why = f" (by {outcome.dropped_by})" if dropped else ""
        out.append(f"dropped: expected {_json(expect.dropped)}, got {_json(dropped)}{why}")
    if expect.destinations is not None:
        got = sorted(delivery.name for delivery in outcome.deliveries)
        if sorted(expect.destinations) != got:
            wanted = ", ".join(sorted(expect.destinations))
            out.append(f"destinations: expected [{wanted}], got [{', '.join(got)}]")
    for text, wanted in expect.fields.items():
        value = field_path(text).get(outcome.event)
        same_type = isinstance(value, bool) == isinstance(wanted, bool)  # True == 1 in Python
        if value is MISSING or value != wanted or not same_type:
            out.append(f"{text}: expected {_json(wanted)}, got {_json(value)}")
    return out


def run_cases(dry_run: DryRun, cases: list[tuple[Case, dict[str, Any]]]) -> list[CaseResult]:
    """Route every case's event through ``dry_run``, in order; what differs per case."""
    return [
        CaseResult(case.name, _differences(case.expect, dry_run.outcome(case.name, event)))
        for case, event in cases
    ]
