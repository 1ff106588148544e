"""The ``object_archive`` target's settings as a user writes them in config.yaml: mistakes
named with file, line and reason before anything starts, and the archive URLs replay and
Spark take."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.config.settings import ConfigError, load_config
from proxy.destinations.object_archive.destination import split_archive_url

CONFIG = """\
consumers:
  archive-s3:
    target:
      kind: object_archive
      bucket: lineage-archive
      prefix: prod/events
      endpoint_url: http://127.0.0.1:9000
      access_key_id_env: S3_ACCESS_KEY
      secret_access_key_env: S3_SECRET_KEY
      part_bytes: 8388608
"""


def _load(tmp_path: Path, text: str):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path, load_config(path, environ={})


def test_the_documented_settings_load(tmp_path):
    _, config = _load(tmp_path, CONFIG)
    target = config.consumers["archive-s3"].target
    assert (target.bucket, target.prefix, target.part_bytes) == (
        "lineage-archive",
        "prod/events",
        8 * 1024 * 1024,
    )


@pytest.mark.parametrize(
    ("replace", "by", "line", "says"),
    [
        ("prefix: prod/events", "prefix: /prod/events/", 3, "no leading or trailing '/'"),
        ("      secret_access_key_env: S3_SECRET_KEY\n", "", 3, "go together"),
        ("part_bytes: 8388608", "part_bytes: 1048576", 10, "greater than or equal to 5242880"),
        ("bucket: lineage-archive", "bucket: ab", 5, "at least 3 characters"),
    ],
    ids=["prefix-slashes", "half-a-key-pair", "part-below-5-MiB", "bucket-too-short"],
)
def test_mistakes_name_file_line_and_reason(tmp_path, replace, by, line, says):
    assert replace in CONFIG
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, CONFIG.replace(replace, by))
    message = str(caught.value)
    assert f"config.yaml:{line}" in message and says in message, message
    assert "\n" not in message.strip()


@pytest.mark.parametrize(
    ("url", "parts"),
    [
        ("s3://bucket/prod/events", ("bucket", "prod/events")),
        ("s3a://bucket/prod/events/", ("bucket", "prod/events")),
        ("s3://bucket", ("bucket", "")),
        ("var/archive", None),
        ("gs://bucket/x", None),
    ],
)
def test_archive_urls_split_into_bucket_and_prefix(url, parts):
    assert split_archive_url(url) == parts
