"""The YAML schema of a rules file (``version: 1``), as pydantic models.

Unknown keys are errors, so a typo fails the load with file and line (see
:mod:`routing_rules.loader`). These models only describe and check the file; turning them
into something fast to evaluate is :mod:`routing_rules.compiler`'s job.

A file holds named ``destinations`` (kafka / archive / http, typed by
:mod:`proxy.destinations.config`), an ordered list of ``rules``, a mandatory
``default`` route for what no rule sends anywhere, and optionally a ``rejected`` route
for events that fail validation.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from proxy.destinations.kinds import DestinationConfig
from proxy.openlineage import EventKind
from proxy.openlineage.paths import FieldPath
from proxy.support.strict import StrictModel
from routing_rules.patterns import PatternSpec, Regex

__all__ = [
    "EVENT_TYPES",
    "FACET_LEVELS",
    "DatasetCondition",
    "DatasetQuantifier",
    "DefaultRoute",
    "FieldTest",
    "Match",
    "NamespaceMapping",
    "NamespaceMappings",
    "RejectedRoute",
    "Rule",
    "RulesFile",
    "Throttle",
    "Transform",
    "rule_names",
]

EVENT_TYPES = ("START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER")
# Where a facet named in ``has_facets`` is looked for: ``run.processing_engine`` etc.
FACET_LEVELS = ("run", "job", "inputs", "outputs", "dataset")


def _field_path(text: str) -> str:
    FieldPath(text)  # raises ValueError with the reason
    return text


def _facet_ref(text: str) -> str:
    level, _, name = text.partition(".")
    if level not in FACET_LEVELS or not name:
        raise ValueError(f"write <level>.<facet name> with level one of {', '.join(FACET_LEVELS)}")
    return text


def _event_type(text: str) -> str:
    if text not in EVENT_TYPES:
        raise ValueError(f"unknown eventType {text!r}; one of {', '.join(EVENT_TYPES)}")
    return text


EventType = Annotated[str, AfterValidator(_event_type)]
Path_ = Annotated[str, AfterValidator(_field_path)]
Scalar = str | bool | int | float | None


class DatasetCondition(StrictModel):
    """Conditions on one dataset; both must hold when both are given."""

    # The dataset's namespace: a string (exact), {regex: ...} or {glob: ...}.
    namespace: PatternSpec | None = None
    # The dataset's name, tested the same way.
    name: PatternSpec | None = None


class DatasetQuantifier(StrictModel):
    """``any``: at least one dataset fits; ``all``: there is one and every one fits."""

    # At least one dataset fits this condition.
    any_: DatasetCondition | None = Field(None, alias="any")
    # There is a dataset and every one fits this condition.
    all_: DatasetCondition | None = Field(None, alias="all")

    @model_validator(mode="after")
    def _exactly_one(self) -> DatasetQuantifier:
        if (self.any_ is None) == (self.all_ is None):
            raise ValueError("give exactly one of any / all")
        return self


class FieldTest(StrictModel):
    """A test on the value at a field path; exactly one key."""

    # The value is a string and the regex matches all of it.
    regex: Regex | None = None
    # The value is a string and the glob (*, ?, [..]) matches it.
    glob: str | None = None
    # The value is one of these (same JSON type).
    in_: list[Scalar] | None = Field(None, alias="in")
    # true: the field is present; false: it is absent.
    exists: bool | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> FieldTest:
        given = [k for k in ("regex", "glob", "in_", "exists") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of regex / glob / in / exists")
        return self


class Match(StrictModel):
    """Every condition given must hold (an empty match holds for every event)."""

    # Event kind: run, job or dataset, or a list of them.
    kind: EventKind | list[EventKind] | None = None
    # eventType: START, RUNNING, COMPLETE, ABORT, FAIL, OTHER, or a list of them.
    event_type: EventType | list[EventType] | None = None
    # job.namespace: a string (exact), {regex: ...} or {glob: ...}.
    job_namespace: PatternSpec | None = None
    # job.name, tested the same way.
    job_name: PatternSpec | None = None
    # The event's producer URI, tested the same way.
    producer: PatternSpec | None = None
    # Conditions on the input datasets (any / all).
    inputs: DatasetQuantifier | None = None
    # Conditions on the output datasets (any / all).
    outputs: DatasetQuantifier | None = None
    # The dataset a DatasetEvent is about.
    dataset: DatasetCondition | None = None
    # Facets the event must carry, as <level>.<name>: run.processing_engine,
    # inputs.schema...
    has_facets: list[Annotated[str, AfterValidator(_facet_ref)]] | None = None
    # field path -> a scalar it must equal (same JSON type), or a FieldTest.
    fields: dict[Path_, Scalar | FieldTest] | None = None
    # Every one of these matches holds.
    all_: list[Match] | None = Field(None, alias="all")
    # At least one of these matches holds.
    any_: list[Match] | None = Field(None, alias="any")
    # This match does not hold.
    not_: Match | None = Field(None, alias="not")


_GROUP_REF = re.compile(r"\\(\d+)|\\g<([^>]*)>")


def _check_group_references(pattern: re.Pattern[str], template: str) -> None:
    """Fail at load, not on the first matching event, when ``to`` names a missing group."""
    for number, name in _GROUP_REF.findall(template):
        ref = number or name
        known = int(ref) <= pattern.groups if ref.isdigit() else ref in pattern.groupindex
        if not known:
            raise ValueError(f"to refers to group {ref!r}, which from_regex does not have")


class NamespaceMapping(StrictModel):
    """Rewrite a namespace: ``from`` an exact value, or ``from_regex`` (full match, the
    ``to`` may use ``\\1`` / ``\\g<name>``)."""

    # The exact namespace to rewrite...
    from_: str | None = Field(None, alias="from")
    # ... or a regex matching all of it.
    from_regex: Regex | None = None
    # The new namespace (may use \1 / \g<name> with from_regex).
    to: str

    @model_validator(mode="after")
    def _exactly_one(self) -> NamespaceMapping:
        if (self.from_ is None) == (self.from_regex is None):
            raise ValueError("give exactly one of from / from_regex")
        if self.from_regex is not None:
            _check_group_references(re.compile(self.from_regex), self.to)
        return self


class NamespaceMappings(StrictModel):
    # Rewrites of input and output dataset namespaces, first match wins.
    datasets: list[NamespaceMapping] = Field(default_factory=list)
    # Rewrites of job (and parent job) namespaces, first match wins.
    jobs: list[NamespaceMapping] = Field(default_factory=list)


class Transform(StrictModel):
    """One transform step; exactly one key."""

    # Remove the facets with these names (or globs), wherever they are in the event.
    drop_facets: list[str] | None = None
    # Replace the values at these field paths with "***REDACTED***".
    redact: list[Path_] | None = None
    # Rewrite dataset and job namespaces.
    map_namespaces: NamespaceMappings | None = None
    # Add these tags (key: value) to the tags facet of the job (of the dataset, for a
    # DatasetEvent).
    add_tags: dict[str, str] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Transform:
        given = [k for k, v in self if v is not None]
        if len(given) != 1:
            raise ValueError(
                "each transform step has exactly one of drop_facets / redact / "
                "map_namespaces / add_tags"
            )
        return self


class Throttle(StrictModel):
    """Keep at most one RUNNING event per run per interval (other types always pass)."""

    # At most one RUNNING event per run per this many seconds.
    interval_seconds: Annotated[float, Field(gt=0)]
    # Runs remembered at once; the least recently seen are forgotten beyond this.
    max_runs: Annotated[int, Field(gt=0)] = 100_000


class Rule(StrictModel):
    # Shown in rules test and counted in metrics; default rule-<n>.
    name: str | None = None
    # When the rule applies; empty: always.
    match: Match = Field(default_factory=Match)
    # Thin out RUNNING events of a run.
    throttle: Throttle | None = None
    # Steps applied in order to the event before it is sent.
    transform: list[Transform] = Field(default_factory=list)
    # Names of the destinations (under destinations:) the event is sent to.
    to: list[str] = Field(default_factory=list)
    # Keep evaluating later rules after this one matched (default: first match wins).
    continue_: bool = Field(False, alias="continue")
    # Send the event nowhere (counted as dropped).
    drop: bool = False

    @model_validator(mode="after")
    def _does_something(self) -> Rule:
        if self.drop and (self.to or self.transform or self.continue_ or self.throttle):
            raise ValueError("drop: true cannot be combined with to / transform / continue")
        if not (self.drop or self.to or self.continue_):
            # Otherwise a match would end evaluation with nowhere to go.
            raise ValueError("a rule needs to:, drop: true or continue: true")
        return self


class DefaultRoute(StrictModel):
    # Where events no rule sent anywhere go...
    to: list[str] = Field(default_factory=list)
    # ... or drop: true to drop them (counted).
    drop: bool = False

    @model_validator(mode="after")
    def _exactly_one(self) -> DefaultRoute:
        if bool(self.to) == self.drop:
            raise ValueError("the default route needs either to: [...] or drop: true")
        return self


class RejectedRoute(StrictModel):
    """Where events that fail validation go as well (the client still gets its 4xx)."""

    # Destinations of refused events, wrapped with their reasons.
    to: Annotated[list[str], Field(min_length=1)]


class RulesFile(StrictModel):
    # The rule language's version: 1.
    version: Literal[1]
    # Named destinations the rules send to (kind kafka, archive or http).
    destinations: dict[str, DestinationConfig] = Field(default_factory=dict)
    # Evaluated in order; the first that matches decides unless it says continue.
    rules: list[Rule] = Field(default_factory=list)
    # Where events no rule sent anywhere go.
    default: DefaultRoute
    # Where events that fail validation go as well; null: nowhere.
    rejected: RejectedRoute | None = None


def rule_names(rules: list[Rule]) -> list[str]:
    """The name each rule is counted under: its own, or ``rule-<n>`` (1-based)."""
    return [r.name or f"rule-{i}" for i, r in enumerate(rules, start=1)]
