"""Job and dataset names follow the official integration and the naming conventions."""

from __future__ import annotations

import pytest

from spark_emitter.dataset_naming import jdbc_dataset, path_dataset, table_symlink
from spark_emitter.events import normalize_name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Execute InsertIntoHadoopFsRelationCommand",
            "execute_insert_into_hadoop_fs_relation_command",
        ),
        ("AdaptiveSparkPlan", "adaptive_spark_plan"),
        ("Daily Sales ETL", "daily_sales_etl"),
        ("someACRONYMInside", "some_acronym_inside"),
        ("  café-orders v2!", "cafe_orders_v2"),
    ],
)
def test_normalize_name_matches_the_official_normaliser(text: str, expected: str) -> None:
    assert normalize_name(text) == expected


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("file:/tmp/out/sales", ("file", "/tmp/out/sales")),
        ("/tmp/plain", ("file", "/tmp/plain")),
        ("s3a://bucket/warehouse/sales", ("s3://bucket", "warehouse/sales")),
        ("s3://bucket/key", ("s3://bucket", "key")),
        ("hdfs://namenode:8020/data/x", ("hdfs://namenode:8020", "/data/x")),
        ("gs://b/p", ("gs://b", "p")),
    ],
)
def test_path_datasets(uri: str, expected: tuple[str, str]) -> None:
    assert path_dataset(uri) == expected


def test_jdbc_datasets_use_the_database_scheme() -> None:
    assert jdbc_dataset("jdbc:postgresql://db:5432/shop", "orders") == (
        "postgres://db:5432",
        "shop.public.orders",
    )
    assert jdbc_dataset("jdbc:postgresql://db:5432/shop", "sales.orders") == (
        "postgres://db:5432",
        "shop.sales.orders",
    )
    assert jdbc_dataset("jdbc:mysql://db:3306/shop", "orders") == ("mysql://db:3306", "shop.orders")


def test_table_symlinks_name_the_metastore_or_the_warehouse() -> None:
    assert table_symlink("sales", "orders", "thrift://meta:9083", "file:/wh") == (
        "hive://meta:9083",
        "sales.orders",
    )
    assert table_symlink("default", "t", None, "hdfs://nn:8020/wh/") == (
        "hdfs://nn:8020/wh",
        "default.t",
    )
