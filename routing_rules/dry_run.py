"""The dry run behind ``lineage-proxy rules test``: what the proxy would do with an event.

Events go through the same validator, repairs and compiled ruleset as in the proxy;
nothing is sent, but each destination says where the event would land: a Kafka topic
and message key (the key function the proxy uses), an archive partition directory (the
archive's own layout), an HTTP target's URL. Events of one run share the ruleset's
state, so a file of RUNNING events shows the throttle at work.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from proxy.destinations.config import DryRunDefaults
from proxy.destinations.kinds import DestinationConfig
from proxy.openlineage.rejected import rejected_envelope
from proxy.openlineage.repaired import Repair, RepairedEvent
from proxy.validation import EventValidator
from proxy.validation.repairs import EventRepairer, validate_or_repair
from routing_rules.compiler import compile_rules
from routing_rules.ruleset import Trace
from routing_rules.schema import RulesFile
from routing_rules.stats import RoutingStats

__all__ = ["Delivery", "DryRun", "Outcome"]


@dataclass(frozen=True, slots=True)
class Delivery:
    """Where one destination would put an event: ``where`` holds the topic and key, the
    archive directory and partition, or the HTTP target kind and URL."""

    name: str
    kind: str
    where: dict[str, Any]

    @property
    def label(self) -> str:
        return f"{self.name} ({self.kind})"

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, **self.where}

    def as_text(self) -> str:
        shown = (f"{k} {'(none)' if v is None else v}" for k, v in self.where.items())
        return f"{self.label}: " + ", ".join(shown)


@dataclass(slots=True)
class Outcome:
    """Where one event would go and in what shape."""

    label: str
    matched: list[str] = field(default_factory=list)
    # (rule, transform, values changed)
    transforms: list[tuple[str, str, int]] = field(default_factory=list)
    destinations: list[str] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
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
            "deliveries": [delivery.as_json() for delivery in self.deliveries],
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
            lines += [f"    {delivery.as_text()}" for delivery in self.deliveries]
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
            lines += [f"    {delivery.as_text()}" for delivery in self.deliveries]
            body = orjson.dumps(self.event, option=orjson.OPT_INDENT_2).decode()
            lines.append("  event as sent:")
            lines += [f"    {line}" for line in body.splitlines()]
        return "\n".join(lines)


class DryRun:
    """Routes events as the proxy would; ``default_topic`` is ``kafka.topic`` and
    ``archive_root`` is ``routing.archive_root`` of the proxy's config."""

    def __init__(
        self,
        rules: RulesFile,
        validator: EventValidator,
        repairer: EventRepairer,
        source: str = "",
        *,
        default_topic: str,
        archive_root: Path,
    ) -> None:
        self.configs: dict[str, DestinationConfig] = dict(rules.destinations)
        self.ruleset = compile_rules(rules, lambda name: name, RoutingStats(), source=source)
        self.validator = validator
        self.repairer = repairer
        self.defaults = DryRunDefaults(topic=default_topic, archive_root=archive_root)

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
            problems = [(i.pointer, i.message) for i in issues]
            # The rejected route gets the event in its envelope (proxy/openlineage/rejected.py).
            envelope = rejected_envelope(
                event, {"problems": [{"pointer": p, "message": m} for p, m in problems]}
            )
            return Outcome(
                label,
                invalid=problems,
                destinations=self._labels(self.ruleset.rejected),
                deliveries=self._deliveries(self.ruleset.rejected, envelope),
                event=event,
            )
        trace = Trace()
        route = self.ruleset.route(event, trace)
        return Outcome(
            label,
            matched=trace.matched,
            transforms=trace.transforms,
            destinations=self._labels(route.destinations),
            deliveries=self._deliveries(route.destinations, route.event),
            dropped_by=route.dropped_by,
            defaulted=trace.defaulted,
            repairs=event.repairs if isinstance(event, RepairedEvent) else (),
            event=route.event,
        )

    def _labels(self, names: Sequence[str]) -> list[str]:
        return [f"{name} ({self.configs[name].kind})" for name in names]

    def _deliveries(self, names: Sequence[str], event: dict[str, Any]) -> list[Delivery]:
        return [Delivery(name, self.configs[name].kind, self._where(name, event)) for name in names]

    def _where(self, name: str, event: dict[str, Any]) -> dict[str, Any]:
        return self.configs[name].dry_run(event, self.defaults)
