#!/usr/bin/env bash
# Install into ./.venv with the test and Spark extras, lint, type-check, and run the whole suite
# (unit, integration against a real broker, end-to-end with real PySpark).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/venv.sh dev,spark
# Debian packages some tests drive for real, installed here when missing and we are root:
# chromium (the status page in a headless browser), zsh and fish (their completion scripts),
# strace (the fsync-before-2xx tests record the proxy's system calls), promtool (package
# prometheus: checks and unit-tests deploy/prometheus's alert rules), postgresql (the
# database under the real Marquez, tests/support/marquez.py).
# Without them those tests fail and say how to get them.
missing=()
for tool in chromium zsh fish strace; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
if [ "${#missing[@]}" -gt 0 ] && [ "$(id -u)" -eq 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") \
    >/dev/null 2>&1 || echo "test.sh: could not install ${missing[*]} (apt-get install ...)" >&2
fi
# helm and kubeconform for the deploy/ tests, built once into the cache.
scripts/deploy_tools.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Types ([tool.mypy] in pyproject.toml); a warm cache makes this about a second.
.venv/bin/mypy
# The import contracts of pyproject.toml: fails when an arrow between layers points up.
.venv/bin/lint-imports
# The docs site: a broken link, an anchor that moved or a page left out of the nav fails.
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$(mktemp -d)"
# Apache Kafka's jars for the test clusters (Maven, once; later runs reuse the cache).
scripts/kafka.sh fetch
status=0
# In parallel (pytest-xdist): each worker is a session with its own broker, ports and
# directories (tests/support/); --dist loadgroup keeps each xdist_group (Spark, dbt) on one
# worker. Most of the suite waits on brokers and processes, so more workers than cores pay.
# LINEAGE_PROXY_TEST_WORKERS=0 runs in one process.
workers="${LINEAGE_PROXY_TEST_WORKERS:-3}"
xdist=()
if [ "$workers" != "0" ]; then xdist=(-n "$workers" --dist loadgroup); fi
.venv/bin/python -m pytest "${xdist[@]}" "$@" || status=$?
if [ "$status" -eq 5 ]; then
  # pytest's "no tests collected": a suite that ran nothing is broken, not green.
  echo "test.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
