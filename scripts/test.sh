#!/usr/bin/env bash
# Install into ./.venv with the test and Spark extras, lint, type-check, and run the whole suite
# (unit, integration against a real broker, end-to-end with real PySpark); with --quick, the
# same checks and the quick tier only: the tests that need no JVM (docs/contributing/test-suite.md).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
usage: scripts/test.sh [--quick] [PYTEST_ARGUMENTS...]

Install ./.venv, run ruff (lint and format check), mypy, the import contracts and the docs
build (mkdocs --strict), then pytest with the arguments given.

  (no option)  the whole suite, what CI runs (.ci/run): Apache Kafka, Spark, Marquez,
               S3Proxy, dbt, Chromium included; at most 15 minutes on 2 cores
  --quick      the quick tier for the edit loop: every test not marked `full` (pytest
               -m "not full": unit tests, and the proxy against the embedded broker,
               Tansu); nothing with a JVM, and no Kafka jars, Chromium or PostgreSQL
               installed; at most 3 minutes
  -h, --help   this help

examples:
  scripts/test.sh --quick
  scripts/test.sh --quick tests/unit -x -k spool
  scripts/test.sh --quick -m "not full and not slow"   # a -m of yours replaces "not full"

LINEAGE_PROXY_TEST_WORKERS=N runs N pytest-xdist workers (default 3, with --quick 6; 0: one
process).
EOF
}

quick=0
case "${1:-}" in
  --quick) quick=1; shift ;;
  -h | --help) usage; exit 0 ;;
esac

scripts/venv.sh dev,spark
# Debian packages some tests drive for real, installed here when missing and we are root:
# zsh and fish (their completion scripts), strace (the fsync-before-2xx tests record the
# proxy's system calls), promtool (package prometheus: checks and unit-tests
# deploy/prometheus's alert rules), jq (a runbook's command, run on the chart's output);
# for the full tier only, chromium (the status page in a
# headless browser) and postgresql (the database under the real Marquez,
# tests/support/marquez.py). Without them those tests fail and say how to get them.
missing=()
for tool in zsh fish strace jq; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
if [ "$quick" -eq 0 ]; then
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
fi
if [ "${#missing[@]}" -gt 0 ] && [ "$(id -u)" -eq 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") \
    >/dev/null 2>&1 || echo "test.sh: could not install ${missing[*]} (apt-get install ...)" >&2
fi
# helm and kubeconform for the deploy/ tests (quick tier too), built once into the cache.
scripts/deploy_tools.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Types ([tool.mypy] in pyproject.toml); a warm cache makes this about a second.
.venv/bin/mypy
# The import contracts of pyproject.toml: fails when an arrow between layers points up.
.venv/bin/lint-imports
# The docs site: a broken link, an anchor that moved or a page left out of the nav fails.
NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true .venv/bin/mkdocs build --strict --quiet --site-dir "$(mktemp -d)"
# In parallel (pytest-xdist): each worker is a session with its own broker, ports and
# directories (tests/support/); --dist loadgroup keeps each xdist_group (Spark, dbt) on one
# worker. Most of the suite waits on brokers and processes, so more workers than cores pay;
# the quick tier waits more still (Tansu, timeouts, processes killed) and computes less.
# LINEAGE_PROXY_TEST_WORKERS=0 runs in one process.
if [ "$quick" -eq 1 ]; then
  # The tests marked `full` (tests/support/tiers.py) are not selected; none is skipped.
  workers="${LINEAGE_PROXY_TEST_WORKERS:-6}"
  selection=(-m "not full")
else
  # Apache Kafka's jars for the test clusters (Maven, once; later runs reuse the cache).
  scripts/kafka.sh fetch
  # PyFlink's venv and the Flink job's jars (tests/flink/), installed before the clock of
  # the suite starts (once; later runs reuse the cache).
  scripts/flink.sh python >/dev/null
  scripts/flink.sh jars >/dev/null
  # Spark's Kafka connector for the Spark job between the Flink job's topics (tests/flink/).
  scripts/spark_kafka.sh >/dev/null
  workers="${LINEAGE_PROXY_TEST_WORKERS:-3}"
  selection=()
fi
xdist=()
if [ "$workers" != "0" ]; then xdist=(-n "$workers" --dist loadgroup); fi
status=0
.venv/bin/python -m pytest "${xdist[@]}" "${selection[@]}" "$@" || status=$?
if [ "$status" -eq 5 ]; then
  # pytest's "no tests collected": a suite that ran nothing is broken, not green.
  echo "test.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
