#!/usr/bin/env bash
# Create ./.venv if needed and install the project into it (editable) with the given
# extras, e.g. `scripts/venv.sh dev,spark`. The one place that knows how we install.
#
# The install is editable, so source changes need no reinstall; only pyproject.toml does
# (dependencies, extras, entry points). A stamp per set of extras holds the hash of what
# was installed, and pip runs again only when that changes (or FORCE_INSTALL=1).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi
stamp=".venv/.installed-${extras:-base}"
want="$(cat pyproject.toml <(printf 'pyspark%s\n' "${PYSPARK_SPEC:-}") | sha256sum | cut -d' ' -f1)"
if [ "${FORCE_INSTALL:-0}" != 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
rm -f "$stamp"
spec="."
[ -n "$extras" ] && spec=".[${extras}]"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$spec" >&2
# CI's second Spark matrix entry pins the older line, e.g. PYSPARK_SPEC='==3.5.*'.
if [ -n "${PYSPARK_SPEC:-}" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "pyspark${PYSPARK_SPEC}" >&2
fi
echo "$want" > "$stamp"
