"""An OpenLineage client configured to record what it sends: the client's own composite
transport sends each event to the proxy and appends it to ``sent.jsonl``, so that file is
the independent record of what the client emitted (what the tests compare against)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import yaml

__all__ = ["recording_config", "sent_events"]


def recording_config(work: Path, proxy_url: str) -> Path:
    """``work/openlineage.yml``: to the proxy at ``proxy_url`` and to ``work/sent.jsonl``."""
    config = {
        "transport": {
            "type": "composite",
            "continue_on_success": True,
            "continue_on_failure": True,
            "transports": {
                "proxy": {"type": "http", "url": proxy_url},
                "file": {"type": "file", "log_file_path": str(work / "sent.jsonl"), "append": True},
            },
        }
    }
    path = work / "openlineage.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def sent_events(work: Path) -> list[dict[str, Any]]:
    """What the client configured by :func:`recording_config` in ``work`` sent, in order."""
    path = work / "sent.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []
