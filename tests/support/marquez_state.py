"""What a Marquez server shows through its own API about a set of events, and how two such
views differ — the oracle of "the proxy is invisible to Marquez".

:func:`marquez_view` reads, for every job and dataset the events name: the namespaces, the
jobs, their runs (state, start/end, duration, facets), the datasets with every version,
the column lineage of each dataset and the lineage graph around each job
(``GET /api/v1/lineage?nodeId=job:…``). Lists whose order Marquez does not define (graph
nodes and edges, fields) are sorted, so two servers that stored the same thing compare
equal. :func:`differences` lists every leaf that differs as ``path: left != right``.

Two kinds of field differ between any two Marquez servers fed the very same events, so
they are left out of the comparison (and named in docs/contributing/marquez-tests.md): the
``updatedAt`` a server stamps from its own clock on namespace, job and dataset rows when
it writes them (:data:`SERVER_CLOCK_FIELDS`; every ``createdAt``, and a run's
``updatedAt``, come from event times in the order events arrived, and *are* compared),
and the random row identifiers it assigns (:data:`SERVER_ASSIGNED_IDS`;
the versions they point at are compared through the version lists, whose ``version`` ids
Marquez derives from the events). One value is a coin toss on any server: a facet an
event sends under the same name both as a dataset facet and as an input facet (the
deprecated dataset-level ``dataQualityMetrics`` and the input one, say). Marquez folds the
two rows into one map with ``JSONB_AGG(df.facet ORDER BY df.lineage_event_time)``
(``DatasetDao``), they share the event's time, and PostgreSQL's sort does not keep the
order of ties, so which one a dataset shows depends on where the rows lie in the table —
on the order events of *different* runs arrived, which nobody promises. Such a facet must
equal one of the values sent under that name (:func:`_tied_facets`). Everything else must
be equal.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

import requests

__all__ = [
    "SERVER_ASSIGNED_IDS",
    "SERVER_CLOCK_FIELDS",
    "TIED_FACET_MARK",
    "api_get",
    "differences",
    "marquez_view",
    "post_events",
    "post_raw",
    "stored_events",
]

# Written by Marquez from its own clock when it stores a row (not from the event).
SERVER_CLOCK_FIELDS = frozenset({"updatedAt"})
# Row ids Marquez draws with UUID.randomUUID() (OpenLineageDao): differ on every server.
SERVER_ASSIGNED_IDS = frozenset({"currentVersion", "parentJobUuid", "datasetVersion"})
# What a tied facet (see the module's docstring) becomes once it equals a value sent.
TIED_FACET_MARK = "<one of the values sent under this name>"
# Objects that are runs: their times come from the events' eventTime.
_RUN_KEYS = frozenset({"runs", "latestRun", "latestRuns"})


def api_get(base: str, path: str, **params: Any) -> Any:
    """``GET {base}/api/v1/{path}`` as JSON (an HTTP error fails)."""
    response = requests.get(f"{base}/api/v1/{path}", params=params, timeout=30)
    response.raise_for_status()
    return response.json()


def _q(name: str) -> str:
    return quote(name, safe="")


def _canonical(value: Any, in_run: bool = False) -> Any:
    """Server-made fields dropped (clock times outside runs, random row ids), lists sorted
    by their text (their order is not part of what Marquez promises), recursively."""
    if isinstance(value, dict):
        dropped = SERVER_ASSIGNED_IDS if in_run else SERVER_ASSIGNED_IDS | SERVER_CLOCK_FIELDS
        return {
            k: _canonical(v, in_run or k in _RUN_KEYS) for k, v in value.items() if k not in dropped
        }
    if isinstance(value, list):
        items = [_canonical(v, in_run) for v in value]
        return sorted(items, key=lambda v: repr(v))
    return value


def _names(events: Iterable[dict[str, Any]]) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    jobs, datasets = set(), set()
    for event in events:
        if "job" in event:
            jobs.add((event["job"]["namespace"], event["job"]["name"]))
        for side in ("inputs", "outputs"):
            for dataset in event.get(side) or []:
                datasets.add((dataset["namespace"], dataset["name"]))
    return jobs, datasets


def marquez_view(base: str, events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Everything ``base`` (a Marquez URL) shows about the jobs and datasets of ``events``."""
    jobs, datasets = _names(events)
    # A dbt/Spark job may be stored under its parent's name (Marquez nests child jobs as
    # parent.child): read the jobs Marquez lists in each namespace the events use.
    namespaces = {ns for ns, _ in jobs | datasets}
    view: dict[str, Any] = {"namespaces": {}, "jobs": {}, "datasets": {}}
    for ns in sorted(namespaces):
        view["namespaces"][ns] = api_get(base, f"namespaces/{_q(ns)}")
        for job in api_get(base, f"namespaces/{_q(ns)}/jobs", limit=1000)["jobs"]:
            if (ns, job["name"]) not in jobs and (ns, job.get("simpleName")) not in jobs:
                continue
            key = f"{ns} {job['name']}"
            path = f"namespaces/{_q(ns)}/jobs/{_q(job['name'])}"
            view["jobs"][key] = {
                "job": job,
                "runs": api_get(base, f"{path}/runs", limit=1000)["runs"],
                "versions": api_get(base, f"{path}/versions", limit=1000)["versions"],
                "lineage": _graph_without_row_ids(
                    api_get(base, "lineage", nodeId=f"job:{ns}:{job['name']}")
                ),
            }
    for ns, name in sorted(datasets):
        path = f"namespaces/{_q(ns)}/datasets/{_q(name)}"
        view["datasets"][f"{ns} {name}"] = {
            "dataset": api_get(base, path),
            "versions": api_get(base, f"{path}/versions", limit=1000)["versions"],
            "columnLineage": _column_lineage(base, f"dataset:{ns}:{name}"),
        }
    _settle_tied_facets(view["datasets"], _tied_facets(events))
    canonical: dict[str, Any] = _canonical(view)
    return canonical


def _tied_facets(events: Iterable[dict[str, Any]]) -> dict[str, dict[str, list[Any]]]:
    """Per dataset (``"namespace name"``), the facet names some event sent both as a
    dataset facet and as an input facet, with every value sent under each name. Output
    facets are not folded into a dataset's facets (``DatasetDao`` takes the types
    dataset, unknown and input), so they tie with nothing."""
    tied: dict[str, dict[str, list[Any]]] = {}
    for event in events:
        for dataset in event.get("inputs") or []:
            facets, input_facets = dataset.get("facets") or {}, dataset.get("inputFacets") or {}
            for name in facets.keys() & input_facets.keys():
                values = tied.setdefault(f"{dataset['namespace']} {dataset['name']}", {})
                values.setdefault(name, []).extend([facets[name], input_facets[name]])
    return tied


def _settle_tied_facets(datasets: dict[str, Any], tied: dict[str, dict[str, list[Any]]]) -> None:
    """Replace a tied facet by a mark when it equals one of the values sent under its name;
    any other value stays and shows as a difference."""
    for key, names in tied.items():
        entry = datasets.get(key)
        if entry is None:
            continue
        for shown in [entry["dataset"], *entry["versions"]]:
            facets = shown.get("facets") or {}
            for name, sent in names.items():
                if facets.get(name) in sent:
                    facets[name] = TIED_FACET_MARK


def _graph_without_row_ids(lineage: dict[str, Any]) -> dict[str, Any]:
    """The lineage graph without what its job nodes' ``latestRun.jobVersion.version``
    holds: not the job's version but the row id of the job's current version
    (``LineageDao.getCurrentRuns`` selects ``jobs.current_version_uuid AS job_version``), a
    ``UUID.randomUUID()`` that differs between two servers fed the same events directly —
    a random v4 UUID where the job's ``versions`` list shows the name-based v3 version."""
    for node in lineage.get("graph") or []:
        job_version = ((node.get("data") or {}).get("latestRun") or {}).get("jobVersion")
        if isinstance(job_version, dict):
            job_version.pop("version", None)
    return lineage


def _column_lineage(base: str, node: str) -> Any:
    """A dataset's column lineage; Marquez answers 404 for a dataset without any."""
    response = requests.get(f"{base}/api/v1/column-lineage", params={"nodeId": node}, timeout=30)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    return response.json()


def differences(left: Any, right: Any, path: str = "") -> list[str]:
    """Every leaf where ``left`` and ``right`` differ, as ``path: left != right``."""
    if isinstance(left, dict) and isinstance(right, dict):
        out = []
        for key in sorted(set(left) | set(right)):
            out += differences(
                left.get(key, "<absent>"), right.get(key, "<absent>"), f"{path}/{key}"
            )
        return out
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        return [
            d
            for i, (a, b) in enumerate(zip(left, right, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    return [] if left == right else [f"{path}: {left!r} != {right!r}"]


def post_events(base: str, events: Iterable[dict[str, Any]]) -> list[int]:
    """POST each event to Marquez as a client would; the statuses, in order."""
    with requests.Session() as session:
        return [
            session.post(f"{base}/api/v1/lineage", json=event, timeout=30).status_code
            for event in events
        ]


def post_raw(base: str, body: bytes) -> tuple[int, bytes]:
    """POST ``body`` as it is (it may not even be JSON): Marquez's status and body."""
    response = requests.post(
        f"{base}/api/v1/lineage",
        data=body,
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    return response.status_code, response.content


def stored_events(base: str, namespace: str | None = None) -> list[dict[str, Any]]:
    """The raw events Marquez kept (``GET /api/v1/events/lineage``), oldest first,
    optionally only those whose job is in ``namespace``."""
    events = api_get(base, "events/lineage", limit=100_000, sortDirection="asc")["events"]
    return [e for e in events if namespace is None or e["job"]["namespace"] == namespace]
