"""Imported by Python at start when ``spark_emitter/autoload`` is on ``PYTHONPATH``: turns
lineage on for the SparkSessions of this process (see ``spark_emitter.autoload``), then
runs the ``sitecustomize`` this one hides, if the environment has one.

To find the next one it takes its *own* folder off the path while importing again. Its own
is where this file is, not where ``spark_emitter.autoload`` was imported from: with two
copies of spark_emitter (a checkout on ``PYTHONPATH``, another installed), the two differ,
and taking the other off the path found this file again, and again (RecursionError, issue
38). Paths are compared resolved: a symlinked or relative entry is the same folder.
"""

from __future__ import annotations

import importlib
import os
import sys

try:
    from spark_emitter.autoload import install
except ImportError as error:  # the folder is on the path, the package not importable
    print(f"openlineage: no lineage, spark_emitter cannot be imported: {error}", file=sys.stderr)
else:
    install()

# Python imports only the first sitecustomize on its path: hand on to the next one.
_here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
_ours = sys.modules.pop(__name__)
_path = sys.path[:]
sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != _here]
try:
    importlib.import_module("sitecustomize")
except ModuleNotFoundError as missing:
    if missing.name != "sitecustomize":
        raise  # the next one failed on an import of its own: Python reports it, as without us
    sys.modules[__name__] = _ours
finally:
    sys.path[:] = _path
