"""A config file that must be refused at load: what the error says about it."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.config.settings import load_config
from proxy.support.yaml_source import ConfigError

__all__ = ["config_refusal"]


def config_refusal(directory: Path, text: str) -> tuple[Path, str]:
    """Write ``text`` as ``directory/config.yaml`` and load it, which must fail; the
    file and the :class:`ConfigError` message."""
    config = directory / "config.yaml"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(config, environ={})
    return config, str(refused.value)
