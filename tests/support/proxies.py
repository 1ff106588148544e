"""The configuration a test's proxy starts from: config.yaml pointed at the test's
broker, topic and this worker's directories."""

from __future__ import annotations

from typing import Any

from proxy.config.settings import ProxyConfig, load_config
from tests.support.paths import ARCHIVE_ROOT, REPO, fresh_spool_directory

__all__ = ["proxy_config"]


def proxy_config(bootstrap: str, topic: str, **sections: dict[str, Any]) -> ProxyConfig:
    """The default config.yaml, pointed at ``bootstrap``/``topic``, with section overrides."""
    base = load_config(REPO / "config.yaml", environ={})
    data = base.model_dump()
    data["kafka"].update(bootstrap_servers=bootstrap, topic=topic)
    data["routing"]["archive_root"] = ARCHIVE_ROOT
    data["kafka"]["spool"]["directory"] = fresh_spool_directory()
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    return ProxyConfig.model_validate(data)
