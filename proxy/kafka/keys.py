"""How a Kafka destination computes each message's key, by name or template.

``run`` is the official clients' convention (:func:`proxy.openlineage.event_key`: every
event of one pipeline run in one partition). ``job`` keys by the event's own job,
``dataset`` by the dataset the event is about (a DatasetEvent's dataset, else the first
output, else the first input), ``none`` sends no key (round-robin partitions), and any
string with ``{...}`` is a template of field paths, e.g. ``"{job.namespace}"`` or
``"{job.namespace}/{run.runId}"``; a path that leads to no string renders as empty.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

from proxy.openlineage import EventKind, event_key, event_kind
from proxy.openlineage.keys import qualified_name
from proxy.openlineage.paths import FieldPath

__all__ = ["KEY_STRATEGIES", "KeyFunction", "key_function"]

KeyFunction = Callable[[dict[str, Any]], str | None]

KEY_STRATEGIES = ("run", "job", "dataset", "none")


def _job_key(event: dict[str, Any]) -> str | None:
    ref = qualified_name(event.get("job"))
    return f"job:{ref}" if ref else None


def _dataset_key(event: dict[str, Any]) -> str | None:
    if event_kind(event) is EventKind.DATASET:
        ref = qualified_name(event.get("dataset"))
        return f"dataset:{ref}" if ref else None
    for side in ("outputs", "inputs"):
        datasets = event.get(side)
        if isinstance(datasets, list) and datasets and (ref := qualified_name(datasets[0])):
            return f"dataset:{ref}"
    return None


def _template_key(template: str) -> KeyFunction:
    parts: list[tuple[str, FieldPath | None]] = []
    for literal, field_name, spec, conversion in string.Formatter().parse(template):
        if spec or conversion:
            raise ValueError(f"key template {template!r}: format specs are not supported")
        if field_name == "":
            raise ValueError(f"key template {template!r}: empty {{}}")
        parts.append((literal, FieldPath(field_name) if field_name is not None else None))

    def render(event: dict[str, Any]) -> str | None:
        out = []
        for literal, path in parts:
            out.append(literal)
            if path is not None:
                value = path.get(event)
                if isinstance(value, str):
                    out.append(value)
        return "".join(out)

    return render


def key_function(strategy: str) -> KeyFunction:
    """The key function for a strategy name or template; ValueError names the problem."""
    if strategy == "run":
        return event_key
    if strategy == "job":
        return _job_key
    if strategy == "dataset":
        return _dataset_key
    if strategy == "none":
        return lambda event: None
    if "{" in strategy:
        return _template_key(strategy)
    raise ValueError(
        f"unknown key strategy {strategy!r}: one of {', '.join(KEY_STRATEGIES)}, "
        'or a template such as "{job.namespace}"'
    )
