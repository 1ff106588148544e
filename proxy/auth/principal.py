"""Who sent a request and what they may post: a token's namespace scope, checked per event.

A token's scope is a list of globs per event kind:

* RunEvents and JobEvents: ``job.namespace`` must match ``namespaces`` — a token for
  ``team-a*`` posting a run of ``team-b`` is refused with 403 — and so must the job
  namespaces of the run's parent and root (parent facet): they decide what the run
  attaches to downstream, so a team-a token cannot hang runs under team-b's jobs.
* The datasets a run or job read or wrote: by default not checked (a job reports what it
  touched, wherever that lives); ``run_datasets: outputs`` checks what it wrote, ``all``
  what it read too, against ``dataset_namespaces``.
* DatasetEvents (no job): ``dataset.namespace`` must match ``dataset_namespaces``, which
  defaults to ``namespaces`` — so a ``team-a*`` token cannot post a DatasetEvent for
  ``postgres://db:5432`` unless that namespace is listed there.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from proxy.openlineage.names import Role, named_namespaces

__all__ = ["ANONYMOUS", "Principal"]

# Which roles of a namespace (proxy/openlineage/names.py) are checked against which scope,
# per ``run_datasets``.
_JOB_ROLES: frozenset[Role] = frozenset({"job", "parent", "root"})
_DATASET_ROLES: dict[str, frozenset[Role]] = {
    "unchecked": frozenset({"dataset"}),
    "outputs": frozenset({"dataset", "output"}),
    "all": frozenset({"dataset", "output", "input"}),
}


@dataclass(frozen=True, slots=True)
class Principal:
    """Who sent a request and which namespaces they may post for."""

    name: str
    namespaces: tuple[str, ...]
    dataset_namespaces: tuple[str, ...]
    run_datasets: Literal["unchecked", "outputs", "all"] = "unchecked"

    def refusal(self, event: dict[str, Any]) -> tuple[str, str, str] | None:
        """The first namespace ``event`` names outside this scope, as (JSON pointer,
        namespace, the scope's setting), or None when every one is in scope."""
        if "*" in self.namespaces and "*" in self.dataset_namespaces:
            return None  # unrestricted (anonymous, or auth off): nothing to walk
        dataset_roles = _DATASET_ROLES[self.run_datasets]
        for role, pointer, namespace in named_namespaces(event):
            if role in _JOB_ROLES:
                if not _matches(namespace, self.namespaces):
                    return pointer, namespace, "namespaces"
            elif role in dataset_roles and not _matches(namespace, self.dataset_namespaces):
                return pointer, namespace, "dataset_namespaces"
        return None

    def may_post_for(self, namespace: str, *, dataset_event: bool = False) -> bool:
        """Whether a job namespace (or, for a DatasetEvent, a dataset namespace) is in scope."""
        return _matches(namespace, self.dataset_namespaces if dataset_event else self.namespaces)


def _matches(namespace: str, patterns: tuple[str, ...]) -> bool:
    # "*" (every anonymous or unrestricted token) matches anything: no pattern match per
    # event (1.8% of a batch's CPU in the profile).
    return "*" in patterns or any(fnmatchcase(namespace, pattern) for pattern in patterns)


ANONYMOUS = Principal("anonymous", ("*",), ("*",))
