"""Lineage for an unchanged PySpark job: configuration only, no ``enable_lineage`` call.

This folder holds a ``sitecustomize.py``. Python imports ``sitecustomize`` at start from
the first folder on its path that has one, so with this folder on ``PYTHONPATH`` every
Python process — ``python job.py``, the driver that ``spark-submit job.py`` starts — runs
:func:`install`, which makes each SparkSession the process builds emit lineage, as the
official jar's ``spark.extraListeners`` does for a JVM job. Where events go is configured
as for ``enable_lineage``: ``OPENLINEAGE_URL`` (and the client's other variables),
``spark.openlineage.transport.*`` or ``openlineage.yml``.

``python -m spark_emitter.instrument <command>`` runs a command with the folder on
``PYTHONPATH``; ``python -m spark_emitter.instrument --pythonpath`` prints it, for setting
``PYTHONPATH`` in a scheduler's environment instead. See docs/clients/spark.md.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["DIRECTORY", "install"]

DIRECTORY = Path(__file__).resolve().parent
_WATCHED = "pyspark.sql.session"
_PATCHED = "_openlineage_autoload"

log = logging.getLogger(__name__)


def _enable(session: Any) -> None:
    """Lineage for ``session``; a failure is logged, never raised into the job."""
    from spark_emitter.enable import enable_lineage

    try:
        enable_lineage(session)
    except Exception as error:
        log.warning("openlineage: lineage not enabled for this Spark session: %s", error)


def _patch(module: ModuleType) -> None:
    """Wrap ``SparkSession.Builder.getOrCreate`` so each session it returns emits. A
    module without it (another PySpark than we know) is logged, never raised: the hook
    runs inside the job's own import and must not break it."""
    session = getattr(module, "SparkSession", None)
    builder = getattr(session, "Builder", None)
    if builder is None:
        log.warning("openlineage: %s has no SparkSession.Builder: no lineage", module.__name__)
        return
    if getattr(builder, _PATCHED, False):
        return
    original = builder.getOrCreate

    def get_or_create(self: Any) -> Any:
        session = original(self)
        _enable(session)
        return session

    get_or_create.__doc__ = original.__doc__
    builder.getOrCreate = get_or_create
    setattr(builder, _PATCHED, True)


class _PatchAfterExec(importlib.abc.Loader):
    """The loader of ``pyspark.sql.session``, wrapped for that one module: it runs the
    module, then patches it. A wrapper, not a change to the loader itself, because a
    loader can be shared: under ``spark-submit`` PySpark comes from ``pyspark.zip``, whose
    one ``zipimporter`` loads every module of the zip, so changing its ``exec_module``
    patched every later PySpark module (``pyspark.sql.conf`` first, half-initialised:
    issue 38). Everything else (``get_source``, ``get_resource_reader``…) is the wrapped
    loader's."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _patch(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches ``pyspark.sql.session`` right after it is imported, so a process that
    never uses Spark never imports it (and pays nothing)."""

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != _WATCHED:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchAfterExec(spec.loader)
        return spec


def install() -> None:
    """Make every SparkSession of this process emit lineage (idempotent)."""
    if _WATCHED in sys.modules:
        _patch(sys.modules[_WATCHED])
        return
    if not any(isinstance(finder, _PatchOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())
