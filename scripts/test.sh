#!/usr/bin/env bash
# Install into ./.venv with the test and Spark extras, lint, type-check, and run the whole suite
# (unit, integration against a real broker, end-to-end with real PySpark).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/venv.sh dev,spark
# Debian packages some tests drive for real, installed here when missing and we are root:
# chromium (the status page in a headless browser), zsh and fish (their completion scripts),
# postgresql (the database under the real Marquez, tests/support/marquez.py).
# Without them those tests fail and say how to get them.
missing=()
for tool in chromium zsh fish; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
if [ "${#missing[@]}" -gt 0 ] && [ "$(id -u)" -eq 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") \
    >/dev/null 2>&1 || echo "test.sh: could not install ${missing[*]} (apt-get install ...)" >&2
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Types ([tool.mypy] in pyproject.toml); a warm cache makes this about a second.
.venv/bin/mypy
# The import contracts of pyproject.toml: fails when an arrow between layers points up.
.venv/bin/lint-imports
status=0
.venv/bin/python -m pytest "$@" || status=$?
if [ "$status" -eq 5 ]; then
  # pytest's "no tests collected": a suite that ran nothing is broken, not green.
  echo "test.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
