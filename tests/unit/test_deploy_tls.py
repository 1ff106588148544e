"""The Helm chart's HTTPS (values proxy.tls): the variables it sets load as server.tls
with the files where the Secret is mounted, and a client-certificate mode the probes
cannot pass is refused. Its branch is conditional, so test_deploy's minimal render drops
it; these checks read the helpers themselves."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from proxy.config import load_config
from tests.unit.test_deploy import CHART, TEMPLATES

HELPERS = (TEMPLATES / "_helpers.tpl").read_text()


def _helper(name: str) -> str:
    start = HELPERS.index(f'{{{{- define "{name}" -}}}}')
    return HELPERS[start : HELPERS.index("{{- end -}}", start)]


def test_tls_variables_load_as_server_tls_with_files_on_the_secrets_mount(tmp_path: Path):
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["proxy"]["tls"] == {"secretName": "", "clientCert": "none"}
    env = dict(
        re.findall(
            r"- name: (LINEAGE_PROXY__SERVER__TLS__\w+)\n\s+value: (.+)",
            _helper("lineage-proxy.tlsEnv"),
        )
    )
    assert env.pop("LINEAGE_PROXY__SERVER__TLS__CLIENT_CERT") == "{{ .clientCert | quote }}"
    (mount,) = re.findall(r"mountPath: (\S+)", _helper("lineage-proxy.tlsMount"))
    assert "secretName: {{ .Values.proxy.tls.secretName }}" in _helper("lineage-proxy.tlsVolume")
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(values["config"]))
    config = load_config(
        config_file, environ={**env, "LINEAGE_PROXY__SERVER__TLS__CLIENT_CERT": "optional"}
    )
    tls = config.server.tls
    assert tls is not None and tls.client_cert == "optional"
    assert [str(path) for _, path in tls.files()] == [
        f"{mount}/tls.crt",
        f"{mount}/tls.key",
        f"{mount}/ca.crt",
    ]


def test_probes_use_https_with_tls_and_required_client_certificates_are_refused():
    deployment = (TEMPLATES / "proxy-deployment.yaml").read_text()
    assert deployment.count('include "lineage-proxy.probeScheme"') == 2
    assert "scheme: HTTPS" in _helper("lineage-proxy.probeScheme")
    assert 'has .clientCert (list "none" "optional")' in _helper("lineage-proxy.tlsEnv")
    for helper in ("tlsEnv", "tlsMount", "tlsVolume"):
        assert f'include "lineage-proxy.{helper}"' in deployment
