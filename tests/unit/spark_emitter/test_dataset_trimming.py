"""Partition directories are trimmed from dataset names as the official integration does.

Cases are the OpenLineage Java client's own trimmer tests (DateTrimmer, KeyValueTrimmer,
MultiDirDateTrimmer, YearMonthTrimmer, ReducedDataset — the defaults the Spark integration
uses), plus the shapes from issue 18.
"""

from __future__ import annotations

import pytest

from spark_emitter.dataset_trimming import trim_dataset_name


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # issue 18
        ("/events/dt=2024-01-01", "/events"),
        ("logs/2024-01-02", "logs"),
        # date: a valid date, with at most T, Z, digits and : . - around it
        ("/tmp/20250721", "/tmp"),
        ("tmp/20250721", "tmp"),
        ("/tmp/2025-07-22", "/tmp"),
        ("/tmp/20250722T0901Z", "/tmp"),
        ("/tmp/20250722T901Z", "/tmp"),
        ("/tmp/20122321", "/tmp/20122321"),  # month 23: not a date
        ("/tmp/dataset_20122321", "/tmp/dataset_20122321"),
        ("/tmp/orders_2025-07-22", "/tmp/orders_2025-07-22"),  # letters left: a name
        # key=value: exactly one "="
        ("/tmp/key=value", "/tmp"),
        ("tmp/key=value", "tmp"),
        ("/tmp/a=b=c", "/tmp/a=b=c"),
        ("/tmp/cat", "/tmp/cat"),
        # year and month, or a date, over several directories
        ("/tmp/2025/07", "/tmp"),
        ("tmp/2025/07", "tmp"),
        ("/tmp/2025/07/21", "/tmp"),
        ("/tmp/2025/14", "/tmp/2025/14"),
        ("/tmp/2025/07/50", "/tmp/2025/07/50"),
        # year-month
        ("/tmp/202507", "/tmp"),
        ("/tmp/2025-07", "/tmp"),
        ("tmp/2025-07", "tmp"),
        ("/tmp/202540", "/tmp/202540"),
        # repeated until nothing applies
        ("/a/b/2025-01-01/c=1", "/a/b"),
        ("/a/b/2025-01-01/c=1/d=1", "/a/b"),
        ("/a/b/2025-01-01/c=1/d=1/20250101T34:34:34.123Z", "/a/b"),
        ("/a/b/2025-01-01/2025-01-01", "/a/b"),
        ("/a/b/c", "/a/b/c"),
        ("/a/b/2025-01-01/2025-01-01/c", "/a/b/2025-01-01/2025-01-01/c"),
        ("/a/b/2025T01T01", "/a/b/2025T01T01"),
    ],
)
def test_partition_directories_are_trimmed_like_the_official_trimmers(
    name: str, expected: str
) -> None:
    assert trim_dataset_name(name) == expected


@pytest.mark.parametrize(
    "name",
    ["20250721", "/20250721", "key=value", "/key=value", "2025/07", "/2025/07/21", "/202507"],
)
def test_a_name_is_never_trimmed_to_nothing(name: str) -> None:
    assert trim_dataset_name(name) == name
