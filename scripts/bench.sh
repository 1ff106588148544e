#!/usr/bin/env bash
# Install into ./.venv (plus the load generator wrk, from Debian, when missing and we are
# root) and run the HTTP ingest benchmark; prints JSON on stdout. Args go to the bench.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/venv.sh dev
if ! command -v wrk >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    (apt-get update -qq && apt-get install -y -qq wrk) >&2
  else
    echo "bench.sh: wrk is needed: apt-get install wrk" >&2
    exit 2
  fi
fi
exec .venv/bin/python bench/http_ingest.py "$@"
