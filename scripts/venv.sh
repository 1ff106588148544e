#!/usr/bin/env bash
# Create ./.venv if needed and install the project into it (editable) with the given
# extras, e.g. `scripts/venv.sh dev,spark`. The one place that knows how we install.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi
spec="."
[ -n "$extras" ] && spec=".[${extras}]"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$spec" >&2
# CI's second Spark matrix entry pins the older line, e.g. PYSPARK_SPEC='==3.5.*'.
if [ -n "${PYSPARK_SPEC:-}" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "pyspark${PYSPARK_SPEC}" >&2
fi
