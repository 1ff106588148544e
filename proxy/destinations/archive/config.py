"""An ``archive`` destination's configuration: JSON Lines files on a local file system."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from proxy.destinations.archive.layout import archive_directory, event_partition
from proxy.destinations.config import DestinationConfigBase, DryRunDefaults
from proxy.destinations.retry_config import RetryConfig
from proxy.kafka.settings import MiB

__all__ = ["ArchiveDestinationConfig"]


class ArchiveDestinationConfig(DestinationConfigBase):
    """An ``archive`` destination in a rules file (or a consumer's ``archive`` target)."""

    runtime: ClassVar[str] = "proxy.destinations.archive.destination"

    # Destination kind: JSON Lines files partitioned by day and namespace.
    kind: Literal["archive"]
    # Relative: under routing.archive_root of config.yaml.
    directory: Path
    # Write gzip files (.jsonl.gz) instead of plain JSON Lines.
    gzip: bool = False
    # A file is finished (renamed to its final name) at this size...
    max_file_bytes: Annotated[int, Field(gt=0)] = 128 * MiB
    # ... or this long after it was opened, whichever comes first.
    max_file_age_seconds: Annotated[float, Field(gt=0)] = 300.0
    # Files open at once; beyond this the oldest open file is finished.
    max_open_files: Annotated[int, Field(gt=0)] = 64
    # A write not fsynced by then answers 503 (under openlineage-python's ~5 s timeout).
    write_timeout_seconds: Annotated[float, Field(gt=0)] = 4.0
    # Retry policy for failed writes (a full disk); null: the client gets 503 at once.
    retry: RetryConfig | None = None

    def retry_policy(self) -> RetryConfig | None:
        return self.retry

    def dry_run(self, event: dict[str, Any], defaults: DryRunDefaults) -> dict[str, Any]:
        directory = archive_directory(self.directory, defaults.archive_root)
        return {"directory": str(directory), "partition": event_partition(event)}
