"""EventValidator: checks one parsed OpenLineage event against the spec, on the hot path.

Where it sits: ingest parses the body, then every event goes through
``EventValidator.validate`` before authorization and routing (proxy/ingest/pipeline.py). It works on
the already-parsed dict, everything is compiled in ``__init__``, and the per-event work
is one pydantic call for the core plus one per known facet.

Facet rules (the spec's facet schemas):

* Every facet is an object with ``_producer`` and ``_schemaURL`` (both URIs). Job and
  dataset facets may carry ``_deleted`` (boolean); a facet with ``_deleted: true`` is a
  deletion marker and its body is not checked.
* The facet's schema comes from its ``_schemaURL``: the ``#/$defs/X`` or
  ``#/definitions/X`` name, else the file stem, whatever the version segment. A URL
  naming a core base type (``OpenLineage.json#/$defs/RunFacet``) or anything unknown
  makes a custom facet: only the base fields are checked (``strict=True`` rejects it).
* When the ``_schemaURL`` names one spec facet but the facet sits under another spec
  facet's conventional key in that container (``datasetType`` carrying
  ``DatasetVersionDatasetFacet.json``), the key wins: the spec's own facet files bind
  keys to definitions, and the official examples carry such copy-paste URLs.
* A spec facet in the wrong container (a dataset facet under ``run.facets``) is still
  checked against its own model; the core schema accepts the placement, so only
  ``strict=True`` reports it.

Where we knowingly differ from the official schemas (tests pin both sides):

* ``_deleted: true`` skips the body check (the files would still demand e.g.
  ``datasetVersion``); a deletion marker has nothing to validate.
* A JobEvent that also carries ``dataset`` is rejected at ``/dataset``; the official
  ``oneOf`` rejects it only when that dataset happens to be valid.
* A trailing newline never passes as part of a URI or date-time. (Integers are as in
  JSON Schema: ``1000.0`` and ``1E3`` are integers, ``1.5`` is not.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import orjson
from pydantic import TypeAdapter, ValidationError

from proxy.openlineage.kinds import EventKind, event_kind
from proxy.support.bounded_cache import BoundedCache
from proxy.validation.core import EVENT_MODELS
from proxy.validation.core_check import core_is_valid
from proxy.validation.extra_schemas import (
    OWN_FACET_SCHEMAS,
    ExtraSchemas,
    issues_from_schema,
    split_schema_url,
)
from proxy.validation.facets import CompiledFacet, Container, SpecRegistry
from proxy.validation.formats import URI_MESSAGE, is_uri
from proxy.validation.issues import (
    ValidationIssue,
    escape_pointer_token,
    issues_from_pydantic,
)

__all__ = ["MAX_ISSUES", "EventValidator"]

MAX_ISSUES = 50
"""Issues reported per event; past this the event is clearly broken and more is noise."""

# Caches keyed by client-controlled strings hold at most this many entries (the oldest
# go first), so a client sending ever-new _schemaURLs cannot grow memory.
_CACHE_LIMIT = 4096
# Facets larger than the first and facet maps larger than the second are not remembered,
# so the two memos hold at most ~16 MiB and ~64 MiB (_CACHE_LIMIT entries each).
_MEMO_FACET_BYTES = 4096
_MEMO_CONTAINER_BYTES = 16384
_MISSING = object()


class _Resolution(NamedTuple):
    """What a facet's (``_schemaURL``, key, container) resolves to."""

    spec: CompiledFacet | None
    extra: Any | None  # a compiled jsonschema-rs validator
    misplaced: bool


_CUSTOM = _Resolution(None, None, False)


class EventValidator:
    """Validate OpenLineage events (spec 2-0-2) and every facet whose schema is known."""

    def __init__(self, *, strict: bool = False, extra_schema_dir: Path | None = None) -> None:
        self._strict = strict
        self._spec = SpecRegistry()
        self._extra = ExtraSchemas(OWN_FACET_SCHEMAS, extra_schema_dir)
        self._events: dict[EventKind, TypeAdapter[Any]] = {
            kind: TypeAdapter(model) for kind, model in EVENT_MODELS.items()
        }
        self._resolutions: BoundedCache[tuple[str, str, Container], _Resolution] = BoundedCache(
            _CACHE_LIMIT
        )
        self._good_uris: BoundedCache[str, None] = BoundedCache(_CACHE_LIMIT)
        # (id of the spec facet model, facet JSON) of facets found valid: see
        # _check_spec_facet. Ids are stable: the models live as long as the validator.
        self._valid_facets: BoundedCache[tuple[object, bytes], None] = BoundedCache(_CACHE_LIMIT)
        # (container, JSON of its facet map) of facet maps found valid: see _check_facets.
        self._valid_containers: BoundedCache[tuple[object, bytes], None] = BoundedCache(
            _CACHE_LIMIT
        )

    def known_facet_names(self) -> frozenset[str]:
        """Names of the facets this validator checks beyond the base fields."""
        return self._spec.names() | self._extra.names()

    def validate(self, event: object) -> list[ValidationIssue]:
        """Every problem with ``event`` (``[]`` when valid). Never raises."""
        issues: list[ValidationIssue] = []
        try:
            self._check_event(event, issues)
        except Exception as exc:  # a validator that raises would turn bad input into a 500
            issues.append(
                ValidationIssue("", f"event could not be validated ({type(exc).__name__})")
            )
        return issues[:MAX_ISSUES]

    # --- the event -------------------------------------------------------------------

    def _check_event(self, event: object, issues: list[ValidationIssue]) -> None:
        if not isinstance(event, dict):
            issues.append(ValidationIssue("", "event must be a JSON object"))
            return
        kind = event_kind(event)
        if kind is None:
            issues.append(ValidationIssue("", "event must have run, job or dataset"))
            return
        if not core_is_valid(event, kind, self._known_uri):
            try:
                self._events[kind].validate_python(event)
            except ValidationError as error:
                issues.extend(issues_from_pydantic(error, ""))
        if kind is EventKind.JOB and "dataset" in event:
            # The official schema's oneOf matches both JobEvent and DatasetEvent here.
            issues.append(ValidationIssue("/dataset", "a JobEvent must not also carry dataset"))

        run = event.get("run")
        if isinstance(run, dict):
            self._check_facets(run, "facets", "/run", Container.RUN, issues)
        job = event.get("job")
        if isinstance(job, dict):
            self._check_facets(job, "facets", "/job", Container.JOB, issues)
        if kind is EventKind.DATASET:
            dataset = event.get("dataset")
            if isinstance(dataset, dict):
                self._check_facets(dataset, "facets", "/dataset", Container.DATASET, issues)
            return
        for field, own_facets, own_container in (
            ("inputs", "inputFacets", Container.INPUT),
            ("outputs", "outputFacets", Container.OUTPUT),
        ):
            datasets = event.get(field)
            if not isinstance(datasets, list):
                continue
            for index, dataset in enumerate(datasets):
                if len(issues) >= MAX_ISSUES:
                    return
                if isinstance(dataset, dict):
                    where = f"/{field}/{index}"
                    self._check_facets(dataset, "facets", where, Container.DATASET, issues)
                    self._check_facets(dataset, own_facets, where, own_container, issues)

    # --- facets ----------------------------------------------------------------------

    def _check_facets(
        self,
        owner: dict[str, Any],
        field: str,
        owner_pointer: str,
        container: Container,
        issues: list[ValidationIssue],
    ) -> None:
        facets = owner.get(field, _MISSING)
        if facets is _MISSING:
            return
        where = f"{owner_pointer}/{field}"
        if not isinstance(facets, dict):
            issues.append(ValidationIssue(where, "must be an object"))
            return
        # A container's facets are valid or not by their JSON and the container alone
        # (the validator's strictness and schemas are fixed): producers send the same
        # engine/job/schema facets event after event, so whole maps are remembered.
        memo = _memo_key(container, facets, _MEMO_CONTAINER_BYTES)
        if memo is not None and memo in self._valid_containers:
            return
        found = len(issues)
        for key, facet in facets.items():
            if len(issues) >= MAX_ISSUES:
                return
            self._check_facet(key, facet, where, container, issues)
        if memo is not None and len(issues) == found:
            self._valid_containers.put(memo, None)

    def _check_facet(
        self,
        key: str,
        facet: Any,
        container_pointer: str,
        container: Container,
        issues: list[ValidationIssue],
    ) -> None:
        if not isinstance(facet, dict):
            issues.append(
                ValidationIssue(
                    f"{container_pointer}/{escape_pointer_token(key)}", "facet must be an object"
                )
            )
            return
        schema_url = facet.get("_schemaURL", _MISSING)
        base_ok = self._check_uri_field(facet, "_producer", key, container_pointer, issues)
        base_ok &= self._check_uri_field(facet, "_schemaURL", key, container_pointer, issues)
        if container is Container.JOB or container is Container.DATASET:
            deleted = facet.get("_deleted", False)
            if deleted is True:
                return  # a deletion marker carries no body
            if deleted is not False:
                issues.append(
                    ValidationIssue(
                        self._at(container_pointer, key, "_deleted"), "must be a boolean"
                    )
                )
        if not isinstance(schema_url, str):
            return
        resolution = self._resolve(schema_url, key, container)
        if resolution.spec is not None:
            self._check_spec_facet(resolution.spec, facet, key, container_pointer, issues)
            if resolution.misplaced and self._strict:
                issues.append(
                    ValidationIssue(
                        self._at(container_pointer, key),
                        f"{resolution.spec.name} belongs in {resolution.spec.container}, "
                        f"not {container}",
                    )
                )
        elif resolution.extra is not None:
            issues.extend(
                issues_from_schema(resolution.extra, facet, self._at(container_pointer, key))
            )
        elif self._strict and base_ok:
            issues.append(
                ValidationIssue(
                    self._at(container_pointer, key, "_schemaURL"),
                    f"unknown facet schema {schema_url}",
                )
            )

    def _check_spec_facet(
        self,
        spec: CompiledFacet,
        facet: dict[str, Any],
        key: str,
        container_pointer: str,
        issues: list[ValidationIssue],
    ) -> None:
        """Validate ``facet`` against its spec model, unless this very facet (same model,
        same JSON) was found valid before: producers send the same facets (engine,
        job type, schemas) event after event, and serializing one costs a fraction of
        validating it. Validity depends on nothing but the model and the JSON."""
        memo = _memo_key(id(spec), facet, _MEMO_FACET_BYTES)
        if memo is not None and memo in self._valid_facets:
            return
        try:
            spec.adapter.validate_python(facet)
        except ValidationError as error:
            issues.extend(issues_from_pydantic(error, self._at(container_pointer, key)))
            return
        if memo is not None:
            self._valid_facets.put(memo, None)

    def _check_uri_field(
        self,
        facet: dict[str, Any],
        field: str,
        key: str,
        container_pointer: str,
        issues: list[ValidationIssue],
    ) -> bool:
        value = facet.get(field, _MISSING)
        if isinstance(value, str) and self._known_uri(value):
            return True
        if value is _MISSING:
            message = "field required"
        elif not isinstance(value, str):
            message = "must be a string"
        else:
            message = URI_MESSAGE
        issues.append(ValidationIssue(self._at(container_pointer, key, field), message))
        return False

    def _known_uri(self, value: str) -> bool:
        """:func:`is_uri`, remembering the URIs found valid (bounded: clients choose them)."""
        if value in self._good_uris:
            return True
        if not is_uri(value):
            return False
        self._good_uris.put(value, None)
        return True

    @staticmethod
    def _at(container_pointer: str, key: str, field: str | None = None) -> str:
        where = f"{container_pointer}/{escape_pointer_token(key)}"
        return where if field is None else f"{where}/{field}"

    def _resolve(self, schema_url: str, key: str, container: Container) -> _Resolution:
        cache_key = (schema_url, key, container)
        resolution = self._resolutions.get(cache_key)
        if resolution is None:
            resolution = self._resolve_uncached(schema_url, key, container)
            self._resolutions.put(cache_key, resolution)
        return resolution

    def _resolve_uncached(self, schema_url: str, key: str, container: Container) -> _Resolution:
        document, stem, definition = split_schema_url(schema_url)
        extra = self._extra.by_id(document, definition)
        if extra is not None:
            return _Resolution(None, extra, False)
        spec = (definition and self._spec.by_schema_name(definition, container)) or (
            self._spec.by_schema_name(stem, container)
        )
        if spec is not None:
            conventional = self._spec.by_key.get((container, key))
            if conventional is not None:
                spec = conventional
            return _Resolution(spec, None, spec.container is not container)
        extra = self._extra.by_file(document, definition)
        if extra is not None:
            return _Resolution(None, extra, False)
        return _CUSTOM


def _memo_key(scope: object, value: Any, limit: int) -> tuple[object, bytes] | None:
    """``(scope, JSON of value)`` to remember a verdict by, or None when ``value`` is too
    large to remember (or holds an integer orjson cannot write)."""
    try:
        body = orjson.dumps(value)
    except TypeError:
        return None
    return (scope, body) if len(body) <= limit else None
