"""An ``object_archive`` destination's configuration: the archive's layout in a bucket."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from proxy.destinations.archive.layout import event_partition
from proxy.destinations.config import DestinationConfigBase, DryRunDefaults
from proxy.destinations.retry_config import RetryConfig
from proxy.kafka.settings import MiB

__all__ = ["ObjectArchiveDestinationConfig"]


class ObjectArchiveDestinationConfig(DestinationConfigBase):
    """An ``object_archive`` destination: the archive's layout in an S3-compatible bucket
    (AWS S3, Google Cloud Storage's S3 API, any S3-compatible server); see
    :mod:`proxy.destinations.object_archive.destination` and docs/consumers/object-storage.md.

    Credentials come from the usual AWS chain (environment, ~/.aws, instance or pod role)
    unless ``access_key_id_env``/``secret_access_key_env`` name the variables holding them.
    """

    runtime: ClassVar[str] = "proxy.destinations.object_archive.destination"

    # Destination kind: JSON Lines objects partitioned by day and namespace in a bucket.
    kind: Literal["object_archive"]
    # The bucket; it must exist.
    bucket: Annotated[str, Field(min_length=3, max_length=63)]
    # Key prefix of the archive inside the bucket (no leading or trailing "/").
    prefix: str = ""
    # Another endpoint than AWS S3: https://storage.googleapis.com for GCS, or a local
    # S3-compatible server. null: AWS (or AWS_ENDPOINT_URL when set).
    endpoint_url: str | None = None
    # Region for request signing; null: the AWS chain's (AWS_REGION, ~/.aws/config).
    region: str | None = None
    # Name of the environment variable holding the access key id (with
    # secret_access_key_env); null: the AWS chain finds credentials.
    access_key_id_env: str | None = None
    # Name of the environment variable holding the secret access key.
    secret_access_key_env: str | None = None
    # Path-style URLs (endpoint/bucket/key): most self-hosted servers need them.
    path_style: bool = False
    # Write gzip objects (.jsonl.gz, one gzip member per part) instead of plain JSON Lines.
    gzip: bool = False
    # An object is finished (its upload completed) at this size...
    max_file_bytes: Annotated[int, Field(gt=0)] = 128 * MiB
    # ... or this long after it was opened. A delivery is acknowledged only once its
    # object is complete, so this is also the longest wait of a delivery.
    max_file_age_seconds: Annotated[float, Field(gt=0)] = 10.0
    # Size of one multipart-upload part (S3's minimum is 5 MiB); bytes held per open
    # object stay about this plus what is being uploaded.
    part_bytes: Annotated[int, Field(ge=5 * MiB)] = 8 * MiB
    # Events a consumer hands over at once (its batch mode): one delivery waits for the
    # object to complete, so batches keep throughput up (see the docs).
    batch_events: Annotated[int, Field(ge=1)] = 500
    # Connect and read timeout of one request to the object store.
    request_timeout_seconds: Annotated[float, Field(gt=0)] = 10.0
    # At start, multipart uploads under the prefix older than this are aborted (left by
    # a writer that crashed mid-upload; they are never visible, but cost storage).
    abort_uploads_after_seconds: Annotated[float, Field(gt=0)] = 86_400.0
    # Retry policy for failed uploads; null: the failure is answered at once.
    retry: RetryConfig | None = None

    @property
    def batch_max_events(self) -> int:
        """How many events the consumer daemon hands over per delivery."""
        return self.batch_events

    @model_validator(mode="after")
    def _credentials_in_pairs(self) -> ObjectArchiveDestinationConfig:
        if (self.access_key_id_env is None) != (self.secret_access_key_env is None):
            raise ValueError("access_key_id_env and secret_access_key_env go together")
        if self.prefix.startswith("/") or self.prefix.endswith("/"):
            raise ValueError("prefix: no leading or trailing '/'")
        return self

    def key_prefix(self, partition: str) -> str:
        """Where the objects of ``partition`` (``dt=…/namespace=…``) go in the bucket."""
        prefix = f"{self.prefix}/" if self.prefix else ""
        return f"{prefix}{partition}/"

    def retry_policy(self) -> RetryConfig | None:
        return self.retry

    def dry_run(self, event: dict[str, Any], defaults: DryRunDefaults) -> dict[str, Any]:
        return {"bucket": self.bucket, "prefix": self.key_prefix(event_partition(event))}
