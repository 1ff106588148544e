"""``python -m spark_emitter.instrument <command> [args...]``: run a PySpark job, unchanged,
with lineage on — ``python job.py`` or ``spark-submit job.py`` alike.

It puts ``spark_emitter/autoload`` (whose ``sitecustomize`` turns lineage on for every
SparkSession) in front of ``PYTHONPATH`` and replaces itself with the command; the driver
Python that command starts inherits it. ``--pythonpath`` prints the value to set in an
environment instead (a scheduler's, a cluster's ``spark-env.sh``). Where events go is
configured as always: ``OPENLINEAGE_URL``, ``spark.openlineage.transport.*``,
``openlineage.yml``; with none of them, the job runs and says it emits no lineage.
"""

from __future__ import annotations

import os
import sys

from spark_emitter.autoload import DIRECTORY

__all__ = ["main", "pythonpath"]


def pythonpath(current: str | None) -> str:
    """``PYTHONPATH`` with the autoload folder first (once)."""
    rest = [p for p in (current or "").split(os.pathsep) if p and p != str(DIRECTORY)]
    return os.pathsep.join([str(DIRECTORY), *rest])


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip().split("\n\n", 1)[0] if __doc__ else "", file=sys.stderr)
        return 2
    if argv[0] == "--pythonpath":
        print(pythonpath(os.environ.get("PYTHONPATH")))
        return 0
    os.environ["PYTHONPATH"] = pythonpath(os.environ.get("PYTHONPATH"))
    try:
        os.execvp(argv[0], argv)
    except OSError as error:
        print(f"spark_emitter.instrument: cannot run {argv[0]}: {error.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached: execvp replaced the process


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
