"""The emitter's own version, for ``producer`` URIs and ``openlineageAdapterVersion``.

Read from the installed distribution's metadata; the emitter may also ship alone (a zip
given to ``spark-submit --py-files``), with no metadata to read, and then says so.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("lineage-proxy")
except PackageNotFoundError:
    __version__ = "unknown"
