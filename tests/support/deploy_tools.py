"""The real tools the deploy/ tests drive — helm, kubeconform, promtool — and the schemas
kubeconform checks against, all offline.

scripts/deploy_tools.sh builds helm and kubeconform from the Go module proxy into the
cache (``${LINEAGE_PROXY_CACHE:-~/.cache/lineage-proxy}/bin``; scripts/test.sh runs it)
and copies the prometheus-operator CRDs there; promtool is Debian's (package
prometheus, which scripts/test.sh installs). The Kubernetes JSON schemas come from the
``kubernetes-validate`` wheel (dev extra); its files carry ``$id``s on kubernetes.io and
absolute ``$ref``s, which a file-based validator would try to fetch, so
:func:`kubernetes_schemas` writes a copy whose references stay in its folder, plus the
two CRDs' OpenAPI schemas in the same layout (strict: no unknown fields).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]  # data files only
import yaml

__all__ = ["KUBERNETES_VERSION", "kubernetes_schemas", "run_tool", "tool"]

CACHE = Path(os.environ.get("LINEAGE_PROXY_CACHE") or Path.home() / ".cache" / "lineage-proxy")
# The Kubernetes version the chart is validated against (its schemas ship in the wheel).
KUBERNETES_VERSION = "1.33.0"
_WHEEL_SCHEMAS = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
_CRDS = CACHE / "crds" / "prometheus-operator"


def tool(name: str) -> Path:
    """The binary ``name``: promtool from PATH (Debian's prometheus package), the others
    from the cache; fails (never skips) with how to get it."""
    if name == "promtool":
        found = shutil.which(name)
        assert found, "promtool is missing: apt-get install prometheus (scripts/test.sh does)"
        return Path(found)
    path = CACHE / "bin" / name
    assert path.is_file(), f"{path} is missing: run scripts/deploy_tools.sh (needs go)"
    return path


def run_tool(name: str, *args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a cached tool; with ``check``, a non-zero exit fails with its output."""
    done = subprocess.run(
        [tool(name), *map(str, args)], capture_output=True, text=True, timeout=300
    )
    if check:
        assert done.returncode == 0, (
            f"{name} {' '.join(map(str, args))}:\n{done.stdout}{done.stderr}"
        )
    return done


def _strict(schema: Any) -> Any:
    """An OpenAPI v3 schema of a CRD with unknown fields refused where the CRD lists its
    fields (as the API server prunes them), left open where it preserves them."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    strict = {key: _strict(value) for key, value in schema.items()}
    if (
        "properties" in strict
        and "additionalProperties" not in strict
        and not strict.get("x-kubernetes-preserve-unknown-fields")
    ):
        strict["additionalProperties"] = False
    return strict


def kubernetes_schemas(target: Path) -> str:
    """Write the schemas under ``target``; return kubeconform's ``-schema-location``."""
    source = _WHEEL_SCHEMAS / f"v{KUBERNETES_VERSION}-local-strict"
    assert source.is_dir(), f"{source} missing: kubernetes-validate has no {KUBERNETES_VERSION}"
    target.mkdir(parents=True, exist_ok=True)
    for path in source.glob("*.json"):
        text = path.read_text().replace('"/api/_definitions.json#', '"_definitions.json#')
        document = json.loads(text)
        document.pop("$id", None)
        (target / path.name).write_text(json.dumps(document))
    crds = sorted(_CRDS.glob("*.yaml"))
    assert len(crds) == 2, f"{_CRDS}: run scripts/deploy_tools.sh (the operator's CRDs)"
    for path in crds:
        crd = yaml.safe_load(path.read_text())
        group = crd["spec"]["group"].split(".")[0]
        kind = crd["spec"]["names"]["kind"].lower()
        for version in crd["spec"]["versions"]:
            schema = _strict(version["schema"]["openAPIV3Schema"])
            (target / f"{kind}-{group}-{version['name']}.json").write_text(json.dumps(schema))
    return str(target / "{{ .ResourceKind }}{{ .KindSuffix }}.json")
