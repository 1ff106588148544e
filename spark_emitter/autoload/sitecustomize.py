"""Imported by Python at start when ``spark_emitter/autoload`` is on ``PYTHONPATH``: turns
lineage on for the SparkSessions of this process (see ``spark_emitter.autoload``), then
runs the ``sitecustomize`` this one hides, if the environment has one."""

from __future__ import annotations

import importlib
import sys

from spark_emitter.autoload import DIRECTORY, install

install()

# Python imports only the first sitecustomize on its path: hand on to the next one.
_ours = sys.modules.pop(__name__)
_path = sys.path[:]
sys.path[:] = [p for p in sys.path if p.rstrip("/") != str(DIRECTORY)]
try:
    importlib.import_module("sitecustomize")
except ModuleNotFoundError:
    sys.modules[__name__] = _ours
finally:
    sys.path[:] = _path
