"""Compare the official Spark integration's events with our emitter's, job by job.

Both saw the same executions (``side_by_side_jobs.py`` runs them in one session with both
listeners), so each conformance job's runs are told apart by time: a run belongs to the job
in whose window its first event falls. Within a job, the runs that wrote something are
paired in order and compared on what a lineage consumer uses — job name, event types (the
RUNNING events folded into one: how many depends on the machine's speed), the parent run,
input and output datasets, which facets are present, column-lineage edges. Runs that wrote
nothing are compared by job name in two lists: Spark's own actions (RDD jobs such as the
file listing's ``map_partitions_parallel_collection``, and the CSV schema inference's
``collect_limit`` and ``deserialize_to_object``), aspect ``read-only actions``; and every
other run without an output (a command such as ``execute_save_as_v1_table_command``, a
failure in analysis), aspect ``output-less runs`` — so the first can be one row for every
job without hiding a run of the second kind.

A difference is ``(job, aspect)`` with the two values; docs/spark-conformance.md lists each
one with its reason, and the test fails on any difference the table does not list (and on
any row the table lists that no longer differs).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = [
    "Difference",
    "compare",
    "documented_differences",
    "documented_job_names",
    "runs_in_windows",
]

Event = dict[str, Any]


@dataclass(frozen=True)
class Difference:
    job: str
    aspect: str
    official: str
    ours: str


def _millis(event: Event) -> int:
    return int(datetime.fromisoformat(event["eventTime"]).timestamp() * 1000)


def _runs(events: list[Event]) -> list[list[Event]]:
    runs: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        runs[event["run"]["runId"]].append(event)
    return sorted(runs.values(), key=lambda run: _millis(run[0]))


def _is_application(run: list[Event]) -> bool:
    return all("parent" not in (e["run"].get("facets") or {}) for e in run)


def _by_window(runs: list[list[Event]], windows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    jobs: dict[str, list[Any]] = {w["job"]: [] for w in windows}
    for run in runs:
        when = _millis(run[0])
        for window in windows:
            if window["start_ms"] <= when < window["end_ms"]:
                jobs[window["job"]].append(run)
                break
    return jobs


def runs_in_windows(events: list[Event], windows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Each job's runs (the application's left out)."""
    return _by_window([r for r in _runs(events) if not _is_application(r)], windows)


class _Normal:
    """Values of one side made comparable: the work directory and the app name out."""

    def __init__(self, workdir: Path, app: str) -> None:
        self.workdir = str(workdir)
        self.app = app

    def text(self, value: str) -> str:
        value = value.replace("file:" + self.workdir, "file:<work>")
        return value.replace(self.workdir, "<work>")

    def job(self, name: str) -> str:
        return name.removeprefix(self.app + ".") if name != self.app else "<app>"

    def datasets(self, run: list[Event], side: str) -> str:
        names = {(d["namespace"], self.text(d["name"])) for e in run for d in e.get(side) or []}
        return ", ".join(f"{ns} {name}" for ns, name in sorted(names)) or "—"

    def facets(self, run: list[Event], where: str) -> set[str]:
        keys: set[str] = set()
        for event in run:
            if where == "run":
                keys |= set(event["run"].get("facets") or {})
            elif where == "job":
                keys |= set(event["job"].get("facets") or {})
            else:
                side = "inputs" if where == "input" else "outputs"
                own = "inputFacets" if where == "input" else "outputFacets"
                for dataset in event.get(side) or []:
                    keys |= set(dataset.get("facets") or {}) | set(dataset.get(own) or {})
        # The client's own run tag (openlineage_client_version) is the transport's, not ours.
        return keys - {"tags"}

    def edges(self, run: list[Event]) -> str:
        found: set[str] = set()
        for event in run:
            for output in event.get("outputs") or []:
                facet = (output.get("facets") or {}).get("columnLineage") or {}
                sources = [
                    (field, source)
                    for field, lineage in (facet.get("fields") or {}).items()
                    for source in lineage.get("inputFields") or []
                ]
                sources += [("*", source) for source in facet.get("dataset") or []]
                for field, source in sources:
                    for t in source.get("transformations") or []:
                        name = Path(self.text(source["name"])).name
                        kind = f"{t['type']}/{t.get('subtype')}"
                        found.add(f"{field}<-{name}.{source['field']} {kind}")
        return "; ".join(sorted(found)) or "—"

    def parent(self, run: list[Event], app_run_id: str) -> str:
        facet = (run[-1]["run"].get("facets") or {}).get("parent")
        if facet is None:
            return "—"
        same = "app run" if facet["run"]["runId"] == app_run_id else "other run"
        root = "root" in facet and facet["root"]["run"]["runId"] == app_run_id
        return f"{self.job(facet['job']['name'])} ({same}{', root app run' if root else ''})"


def _event_types(run: list[Event]) -> str:
    types = [e["eventType"] for e in run]
    folded = [
        t for i, t in enumerate(types) if t != "RUNNING" or i == 0 or types[i - 1] != "RUNNING"
    ]
    return " ".join(folded)


def _wrote(run: list[Event]) -> bool:
    return any(e.get("outputs") for e in run)


# The SQL actions of CSV schema inference (``inferSchema``): the first line, then the rows.
_SCHEMA_INFERENCE = frozenset({"collect_limit", "deserialize_to_object"})


def _spark_internal(run: list[Event], normal: _Normal) -> bool:
    """A run of Spark's own making, not of the job's code: an RDD job, or schema inference."""
    job = run[0]["job"]
    job_type = ((job.get("facets") or {}).get("jobType") or {}).get("jobType")
    return job_type == "RDD_JOB" or normal.job(job["name"]) in _SCHEMA_INFERENCE


_FACETS = ("run", "job", "input", "output")


def _aspects(run: list[Event], normal: _Normal, app_run_id: str) -> dict[str, str]:
    """What is compared of a run; a facet kind is an aspect of its own (``run facet X``),
    so one facet that only one side writes is one row, whatever else differs."""
    aspects = {
        "job name": normal.job(run[0]["job"]["name"]),
        "event types": _event_types(run),
        "parent": normal.parent(run, app_run_id),
        "inputs": normal.datasets(run, "inputs"),
        "outputs": normal.datasets(run, "outputs"),
        "column lineage": normal.edges(run),
    }
    for where in _FACETS:
        for kind in normal.facets(run, where):
            aspects[f"{where} facet {kind}"] = "yes"
    return aspects


def compare(
    official: list[Event],
    ours: list[Event],
    windows: list[dict[str, Any]],
    workdir: Path,
    app: str,
) -> list[Difference]:
    """Every difference between the two sides' events, job by job."""
    normal = _Normal(workdir, app)
    differences: list[Difference] = []
    sides = []
    for events in (official, ours):
        runs = _runs(events)
        apps = [r for r in runs if _is_application(r)]
        assert len(apps) == 1, [r[0]["job"]["name"] for r in apps]
        sides.append((apps[0], _by_window([r for r in runs if r is not apps[0]], windows)))
    (official_app, official_jobs), (our_app, our_jobs) = sides
    app_ids = (official_app[0]["run"]["runId"], our_app[0]["run"]["runId"])

    def differ(job: str, theirs: dict[str, str], mine: dict[str, str]) -> None:
        for aspect in sorted(theirs.keys() | mine.keys()):
            value, our_value = theirs.get(aspect, "—"), mine.get(aspect, "—")
            if value != our_value:
                differences.append(Difference(job, aspect, value, our_value))

    differ(
        "application",
        _aspects(official_app, normal, app_ids[0]),
        _aspects(our_app, normal, app_ids[1]),
    )
    for window in windows:
        job = window["job"]
        theirs = official_jobs[job]
        mine = our_jobs[job]
        for aspect, internal in (("read-only actions", True), ("output-less runs", False)):
            names = [
                ", ".join(
                    sorted(
                        normal.job(r[0]["job"]["name"])
                        for r in side
                        if not _wrote(r) and _spark_internal(r, normal) is internal
                    )
                )
                or "—"
                for side in (theirs, mine)
            ]
            if names[0] != names[1]:
                differences.append(Difference(job, aspect, *names))
        theirs = [r for r in theirs if _wrote(r)]
        mine = [r for r in mine if _wrote(r)]
        if len(theirs) != len(mine):
            names = [", ".join(normal.job(r[0]["job"]["name"]) for r in s) for s in (theirs, mine)]
            differences.append(Difference(job, "runs", *names))
            # Pair what has the same outputs; the rest is in the "runs" row.
            mine_by_outputs = {normal.datasets(r, "outputs"): r for r in mine}
            pairs = [
                (r, mine_by_outputs[normal.datasets(r, "outputs")])
                for r in theirs
                if normal.datasets(r, "outputs") in mine_by_outputs
            ]
        else:
            pairs = list(zip(theirs, mine, strict=True))
        for official_run, our_run in pairs:
            differ(
                job,
                _aspects(official_run, normal, app_ids[0]),
                _aspects(our_run, normal, app_ids[1]),
            )
    return differences


_ROW = re.compile(r"^\|\s*`?(?P<job>[a-z_*]+)`?\s*\|\s*`?(?P<aspect>[A-Za-z_. -]+?)`?\s*\|")


def documented_differences(page: Path) -> dict[tuple[str, str], bool]:
    """(job, aspect) of every row of the differences table in ``page`` (the table after
    the heading ``## Differences``, its first two columns; job ``*`` is every job), each
    with whether the difference may also be absent: a reason that starts with
    ``**Timing:**`` (it depends on how far the job got before something else happened)."""
    text = page.read_text(encoding="utf-8")
    section = text.split("## Differences", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = _ROW.match(line)
        if match and match["job"] != "job":
            reason = line.rstrip().rstrip("|").rsplit("|", 1)[-1].strip()
            rows[(match["job"], match["aspect"])] = reason.startswith("**Timing:**")
    return rows


def documented_job_names(page: Path) -> dict[str, str]:
    """Each job's ``job name`` row in ``page``: its "spark_emitter" cell, which names our job.
    A job name row covers only the name it shows — that a job keeps its name is what
    stops its history from splitting, so a renamed job is a new difference."""
    text = page.read_text(encoding="utf-8")
    section = text.split("## Differences", 1)[1].split("\n## ", 1)[0]
    names = {}
    for line in section.splitlines():
        match = _ROW.match(line)
        if match and match["aspect"] == "job name":
            names[match["job"]] = line.split("|")[4]
    return names
