"""The dry run behind ``lineage-proxy rules test``: what the proxy would do with an event.

Events go through the same validator, repairs and compiled ruleset as in the proxy;
destinations are only named, nothing is sent. Events of one run share the ruleset's
state, so a file of RUNNING events shows the throttle at work.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.openlineage.repaired import Repair, RepairedEvent
from proxy.validation import EventValidator
from proxy.validation.repairs import EventRepairer, validate_or_repair
from routing_rules.compiler import compile_rules
from routing_rules.ruleset import Trace
from routing_rules.schema import RulesFile
from routing_rules.stats import RoutingStats

__all__ = ["DryRun", "Outcome"]


@dataclass(slots=True)
class Outcome:
    """Where one event would go and in what shape."""

    label: str
    matched: list[str] = field(default_factory=list)
    # (rule, transform, values changed)
    transforms: list[tuple[str, str, int]] = field(default_factory=list)
    destinations: list[str] = field(default_factory=list)
    dropped_by: str | None = None
    defaulted: bool = False
    # Validation problems (pointer, message); the event then takes the rejected route.
    invalid: list[tuple[str, str]] = field(default_factory=list)
    # What the proxy would repair before routing (proxy/validation/repairs.py).
    repairs: tuple[Repair, ...] = ()
    event: Any = None

    def as_json(self) -> dict[str, Any]:
        return {
            "event_label": self.label,
            "valid": not self.invalid,
            "problems": [{"pointer": p, "message": m} for p, m in self.invalid],
            "repaired": [repair.as_json() for repair in self.repairs],
            "matched": self.matched,
            "transforms": [
                {"rule": r, "transform": t, "changed": n} for r, t, n in self.transforms
            ],
            "destinations": self.destinations,
            "dropped_by": self.dropped_by,
            "default_route": self.defaulted,
            "event": self.event,
        }

    def as_text(self) -> str:
        lines = [f"{self.label}:"]
        if self.invalid:
            lines.append("  invalid, the client gets 400:")
            lines += [f"    {p or '/'}: {m}" for p, m in self.invalid]
            lines.append(f"  rejected route: {', '.join(self.destinations) or '(none)'}")
            return "\n".join(lines)
        for repair in self.repairs:
            lines.append(
                f"  repaired [{repair.name}] {repair.pointer}: {repair.before} → {repair.after}"
            )
        lines.append(f"  matched: {', '.join(self.matched) or '(no rule)'}")
        for rule, transform, changed in self.transforms:
            lines.append(f"  transform [{rule}] {transform}: {changed} changed")
        if self.dropped_by is not None:
            lines.append(f"  dropped by: {self.dropped_by}")
        else:
            via = " (default route)" if self.defaulted else ""
            lines.append(f"  destinations{via}: {', '.join(self.destinations)}")
            body = orjson.dumps(self.event, option=orjson.OPT_INDENT_2).decode()
            lines.append("  event as sent:")
            lines += [f"    {line}" for line in body.splitlines()]
        return "\n".join(lines)


class DryRun:
    def __init__(
        self,
        rules: RulesFile,
        validator: EventValidator,
        repairer: EventRepairer,
        source: str = "",
    ) -> None:
        kinds = {name: config.kind for name, config in rules.destinations.items()}
        self.ruleset = compile_rules(
            rules, lambda name: f"{name} ({kinds[name]})", RoutingStats(), source=source
        )
        self.validator = validator
        self.repairer = repairer

    def outcomes(self, label: str, document: Any) -> Iterator[Outcome]:
        """One outcome per event; a JSON array is a batch, labelled ``label[i]``."""
        if isinstance(document, list):
            for index, event in enumerate(document):
                yield self.outcome(f"{label}[{index}]", event)
        else:
            yield self.outcome(label, document)

    def outcome(self, label: str, event: Any) -> Outcome:
        event, issues = validate_or_repair(self.validator, self.repairer, event)
        if issues:
            return Outcome(
                label,
                invalid=[(i.pointer, i.message) for i in issues],
                destinations=list(self.ruleset.rejected),
                event=event,
            )
        trace = Trace()
        route = self.ruleset.route(event, trace)
        return Outcome(
            label,
            matched=trace.matched,
            transforms=trace.transforms,
            destinations=[str(d) for d in route.destinations],
            dropped_by=route.dropped_by,
            defaulted=trace.defaulted,
            repairs=event.repairs if isinstance(event, RepairedEvent) else (),
            event=route.event,
        )
