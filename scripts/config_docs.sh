#!/usr/bin/env bash
# Regenerate what is generated from the config models: the JSON Schemas of config.yaml
# and of rules files (schemas/), the configuration reference (docs/reference/configuration.md),
# the Helm chart's values.schema.json (its config: is the config schema) and the generated
# reference pages of the docs (CLI, HTTP API, metrics).
# The tests fail when the committed copies are stale; run this after changing a model,
# a command or a metric.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/venv.sh dev
mkdir -p schemas docs/reference
.venv/bin/lineage-proxy schema config > schemas/config.schema.json
.venv/bin/lineage-proxy schema rules > schemas/rules.schema.json
.venv/bin/lineage-proxy config-reference > docs/reference/configuration.md
.venv/bin/python scripts/chart_schema.py > deploy/helm/lineage-proxy/values.schema.json
.venv/bin/python -m proxy.cli.docs_reference docs/reference
