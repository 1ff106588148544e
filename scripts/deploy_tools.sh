#!/usr/bin/env bash
# Build the tools the deploy/ tests drive for real — helm (lint, template) and kubeconform
# (Kubernetes schema validation) — from the Go module proxy into
# ${LINEAGE_PROXY_CACHE:-$HOME/.cache/lineage-proxy}/bin. (promtool, which checks and
# unit-tests the alert rules, comes from Debian's prometheus package: scripts/test.sh
# installs it; building it from Go takes the better part of an hour on 2 cores.)
# A tool already built at the pinned version is kept: a second run builds nothing.
# The Kubernetes JSON schemas kubeconform validates against come from the PyPI package
# kubernetes-validate (the dev extra), not from the network at test time.
set -euo pipefail
cache="${LINEAGE_PROXY_CACHE:-$HOME/.cache/lineage-proxy}"
bin="$cache/bin"
mkdir -p "$bin"
tools=(
  "helm helm.sh/helm/v3/cmd/helm@v3.19.0"
  "kubeconform github.com/yannh/kubeconform/cmd/kubeconform@v0.7.0"
)
for entry in "${tools[@]}"; do
  read -r name package <<<"$entry"
  version="${package##*@}"
  stamp="$bin/.$name-$version"
  if [ -x "$bin/$name" ] && [ -e "$stamp" ]; then
    continue
  fi
  echo "deploy_tools.sh: building $name ($version) into $bin" >&2
  # Built inside a throwaway module (`go install pkg@version` refuses modules whose
  # go.mod has replace or exclude directives; a module of our own does not).
  work="$cache/build/$name"
  rm -rf "$work" && mkdir -p "$work"
  (
    cd "$work"
    go mod init "lineage-proxy-tools/$name" >/dev/null 2>&1
    GOFLAGS=-mod=mod go get "$package"
    GOFLAGS=-mod=mod go build -o "$bin/$name" "${package%@*}"
  )
  rm -f "$bin/.$name-"*
  touch "$stamp"
done
# The CustomResourceDefinitions of the prometheus-operator objects the chart renders
# (ServiceMonitor, PrometheusRule), from the operator's Go module, for kubeconform.
crds="$cache/crds/prometheus-operator"
operator="github.com/prometheus-operator/prometheus-operator@v0.85.0"
if [ ! -e "$crds/.${operator##*@}" ]; then
  dir="$(GOFLAGS=-mod=mod go mod download -json "$operator" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  rm -rf "$crds" && mkdir -p "$crds"
  cp "$dir"/example/prometheus-operator-crd/monitoring.coreos.com_{servicemonitors,prometheusrules}.yaml "$crds/"
  touch "$crds/.${operator##*@}"
fi
