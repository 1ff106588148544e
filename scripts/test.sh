#!/usr/bin/env bash
# Install into ./.venv with the test and Spark extras, lint, type-check, and run the whole suite
# (unit, integration against a real broker, end-to-end with real PySpark).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/venv.sh dev,spark
# The status page is tested in a real headless browser (Debian's chromium), installed here
# when missing and we are root; without it that test fails and says how to get it.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
    >/dev/null 2>&1 || echo "test.sh: could not install chromium (apt-get install chromium)" >&2
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
