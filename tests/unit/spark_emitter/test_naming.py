"""Job and dataset names follow the official integration and the naming conventions."""

from __future__ import annotations

import pytest

from spark_emitter.dataset_naming import (
    jdbc_dataset,
    kafka_datasets,
    kafka_topics,
    path_dataset,
    table_symlink,
)
from spark_emitter.events import AppContext, job_name, normalize_name
from spark_emitter.execution import ExecutionFacts, WriteFacts


# Inputs → names from the official NameNormalizer's own test (1.41+, where "_" goes only
# between a digit and an upper-case letter), plus Spark node names.
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Execute InsertIntoHadoopFsRelationCommand",
            "execute_insert_into_hadoop_fs_relation_command",
        ),
        ("AdaptiveSparkPlan", "adaptive_spark_plan"),
        ("Daily Sales ETL", "daily_sales_etl"),
        ("", ""),
        ("word", "word"),
        ("@ more than one     words !", "more_than_one_words"),
        ("with some Capitalized WORDS", "with_some_capitalized_words"),
        ("this (includes some) parenthesis", "this_includes_some_parenthesis"),
        ("in glue/aws we can have slashes", "in_glue_aws_we_can_have_slashes"),
        (
            "theNamesLikeThisShouldBeSeparated - are they?",
            "the_names_like_this_should_be_separated_are_they",
        ),
        ("testXMLTest", "test_xml_test"),
        ("testXMLtest", "test_xm_ltest"),
        ("someACRONYMInside", "some_acronym_inside"),
        ("foreignLetters ąśé•¶€ are supported", "foreign_letters_ase_are_supported"),
        ("but to a degree 这是一个例子", "but_to_a_degree"),
        ("323digits123Should45BE_ALSO34 fine89", "323digits123_should45_be_also34_fine89"),
        ("MyXMLBasedApplication", "my_xml_based_application"),
        ("JDBCRelationApplication", "jdbc_relation_application"),
        ("Test With a Single LetterBetweenWords", "test_with_a_single_letter_between_words"),
        # A digit splits from an upper-case letter only: UUIDs and tbl1x stay whole.
        ("c9acd38e_71d4_4a61_89d5_fd4ff842bf79_0", "c9acd38e_71d4_4a61_89d5_fd4ff842bf79_0"),
        ("tbl1x", "tbl1x"),
        ("tbl1X", "tbl1_x"),
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


def test_kafka_topics_are_named_by_the_first_bootstrap_server() -> None:
    # The official Spark jar's and Flink's names: kafka://{first server} + the topic.
    assert kafka_datasets("10.0.0.2:9092, 10.0.0.1:9092", ["clicks", "views"]) == [
        ("kafka://10.0.0.2:9092", "clicks"),
        ("kafka://10.0.0.2:9092", "views"),
    ]
    assert kafka_datasets("broker1:9092", []) == []


@pytest.mark.parametrize(
    ("options", "topics"),
    [
        ({"subscribe": "clicks, views,clicks"}, ["clicks", "views"]),
        ({"assign": '{"clicks": [0, 1], "views": [0]}'}, ["clicks", "views"]),
        ({"subscribePattern": "click.*"}, []),
    ],
)
def test_kafka_topics_of_a_sources_options(options: dict[str, str], topics: list[str]) -> None:
    assert kafka_topics(options) == topics


APP = AppContext(namespace="ns", app_name="sales_etl", app_run_id="r", spark_version="4.0")
INSERT = "Execute InsertIntoHadoopFsRelationCommand"


def _job(command: str, write: WriteFacts) -> str:
    facts = ExecutionFacts(1, "command", command, 0, 1, None, write=write)
    return job_name(APP, facts)


@pytest.mark.parametrize(
    ("command", "write", "suffix"),
    [
        # INSERT INTO a table: the last two parts of its location, not db_table.
        (
            INSERT,
            WriteFacts(("file", "/wh/sales.db/orders"), ("file:/wh", "sales.orders")),
            "sales_db_orders",
        ),
        # CREATE TABLE AS SELECT names the table it creates.
        (
            "Execute CreateDataSourceTableAsSelectCommand",
            WriteFacts(
                ("file", "/wh/orders"),
                ("file:/wh", "default.orders"),
                "CREATE",
                job_named_by_table=True,
            ),
            "default_orders",
        ),
        # A write into a partition directory is named by the dataset's directory.
        (INSERT, WriteFacts(("file", "/data/events/dt=2024-01-01")), "data_events"),
        (INSERT, WriteFacts(("s3://lake", "raw/logs/2024/01/02")), "raw_logs"),
        # The suffix is not normalised: only dots are replaced.
        (INSERT, WriteFacts(("file", "/data/Demo/gold-users.v2")), "Demo_gold-users_v2"),
        (INSERT, WriteFacts(("postgres://db:5432", "shop.public.orders")), "shop_public_orders"),
    ],
)
def test_job_names_are_suffixed_like_the_official_job_name_builder(
    command: str, write: WriteFacts, suffix: str
) -> None:
    assert _job(command, write) == f"sales_etl.{normalize_name(command)}.{suffix}"


def test_a_kafka_write_adds_no_topic_to_its_job_name() -> None:
    # As the official jar names it: sales_etl.execute_save_into_data_source_command.
    write = WriteFacts(("kafka://broker1:9092", "clicks.upper"), data_source="kafka")
    write.job_suffixed = False
    command = "Execute SaveIntoDataSourceCommand"
    assert _job(command, write) == "sales_etl.execute_save_into_data_source_command"
