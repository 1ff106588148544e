"""Where the repository, the OpenLineage spec and this worker's scratch directories are.

The archive and spool roots are made once per process, so each xdist worker has its own;
the session fixture in tests/conftest.py removes them at the end."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tests.support.workers import worker_name

__all__ = ["ARCHIVE_ROOT", "CACHE", "REPO", "SPEC_DIR", "SPOOL_ROOT", "fresh_spool_directory"]

REPO = Path(__file__).resolve().parents[2]
# The official OpenLineage spec (JSON Schemas and examples), the oracle of the validator
# tests: next to the repository, or wherever OPENLINEAGE_SPEC_DIR says.
SPEC_DIR = Path(
    os.environ.get("OPENLINEAGE_SPEC_DIR") or REPO.parent / "shared" / "openlineage-spec"
)
# What the tests fetch or build once and reuse on later runs and fresh clones (Kafka,
# Marquez, the official Spark jar, the dbt venv): outside git, shared with scripts/*.sh.
CACHE = Path(os.environ.get("LINEAGE_PROXY_CACHE") or Path.home() / ".cache" / "lineage-proxy")
# Where proxies started by tests archive events unless a test names its own directory.
ARCHIVE_ROOT = Path(tempfile.mkdtemp(prefix=f"lineage-proxy-test-archive-{worker_name()}-"))
# Each proxy a test starts spools (Kafka outage) into a directory of its own under this.
SPOOL_ROOT = Path(tempfile.mkdtemp(prefix=f"lineage-proxy-test-spool-{worker_name()}-"))


def fresh_spool_directory() -> Path:
    return Path(tempfile.mkdtemp(dir=SPOOL_ROOT))
