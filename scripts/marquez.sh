#!/usr/bin/env bash
# A real Marquez 0.50.0 (API server + private PostgreSQL cluster) on loopback, for a developer:
#   scripts/marquez.sh fetch   into ${LINEAGE_PROXY_CACHE:-~/.cache/lineage-proxy}/marquez-0.50.0
#   scripts/marquez.sh start   start it in the background; prints its URL when healthy
#   scripts/marquez.sh stop    stop it (Marquez, then PostgreSQL) and remove its data
# Maven Central as served to this project's machines has no marquez-api: `fetch` then builds
# it from Marquez's sources at tag 0.50.0 — a clone named by MARQUEZ_SOURCE, or the source
# snapshot the project's machines keep beside the repository (MARQUEZ_SOURCE_ARCHIVE).
# The logic is in tests/support/marquez.py, the one place the tests use too.
set -euo pipefail
cd "$(dirname "$0")/.."
run="${LINEAGE_PROXY_CACHE:-$HOME/.cache/lineage-proxy}/marquez-run"
case "${1:-}" in
  fetch) exec .venv/bin/python -m tests.support.marquez fetch ;;
  start)
    mkdir -p "$run"
    if [ -f "$run/pid" ] && kill -0 "$(cat "$run/pid")" 2>/dev/null; then
      echo "marquez: already running (pid $(cat "$run/pid")); see $run/log" >&2; exit 1
    fi
    : > "$run/log"
    nohup .venv/bin/python -m tests.support.marquez run >"$run/log" 2>&1 &
    echo $! > "$run/pid"
    until grep -q "^Marquez " "$run/log"; do
      kill -0 "$(cat "$run/pid")" 2>/dev/null || { cat "$run/log" >&2; exit 1; }
      sleep 1
    done
    grep "^Marquez " "$run/log" ;;
  stop)
    [ -f "$run/pid" ] || { echo "marquez: not started by this script" >&2; exit 1; }
    pid="$(cat "$run/pid")"
    kill -TERM "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.5; done
    rm -f "$run/pid"; echo "marquez: stopped" ;;
  *) echo "usage: scripts/marquez.sh fetch|start|stop" >&2; exit 2 ;;
esac
