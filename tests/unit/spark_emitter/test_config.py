"""Emitter settings: arguments over Spark conf over environment, with clear errors."""

from __future__ import annotations

import pytest

from spark_emitter.config import ConfigurationError, resolve_config


def test_spark_conf_uses_the_official_key_names() -> None:
    config = resolve_config(
        {
            "spark.openlineage.transport.url": "http://proxy:5000",
            "spark.openlineage.transport.endpoint": "/lineage/v1",
            "spark.openlineage.transport.auth.apiKey": "k",
            "spark.openlineage.transport.timeoutInMillis": "2500",
            "spark.openlineage.namespace": "etl",
            "spark.openlineage.parentJobNamespace": "airflow",
            "spark.openlineage.parentJobName": "dag.task",
            "spark.openlineage.parentRunId": "0176a8c2-fe01-7439-87e6-56a1a1b4029f",
            "spark.openlineage.jobName.appendDatasetName": "false",
            "spark.openlineage.capturedProperties": "spark.master, spark.executor.memory",
        },
        {},
        {},
    )
    # No type with a url: http, as before transports had types.
    assert config.transport == {
        "type": "http",
        "url": "http://proxy:5000",
        "endpoint": "/lineage/v1",
        "auth": {"type": "api_key", "apiKey": "k"},
        "timeout": 2.5,
    }
    assert config.namespace == "etl"
    assert (config.parent_namespace, config.parent_name) == ("airflow", "dag.task")
    assert config.append_dataset_name is False
    assert config.captured_properties == ("spark.master", "spark.executor.memory")


def test_environment_fills_what_spark_conf_leaves_out() -> None:
    config = resolve_config(
        {"spark.openlineage.namespace": "from-conf"},
        {"OPENLINEAGE_URL": "http://env:5000", "OPENLINEAGE_NAMESPACE": "from-env"},
        {},
    )
    # The transport from the environment is the client's business (delivery.open_client).
    assert (config.transport, config.namespace) == (None, "from-conf")


def test_arguments_win_over_spark_conf() -> None:
    config = resolve_config(
        {
            "spark.openlineage.transport.url": "http://conf",
            "spark.openlineage.transport.auth.apiKey": "conf-key",
        },
        {"OPENLINEAGE_URL": "http://env"},
        {"url": "http://arg", "namespace": None, "timeout": 1.5},
    )
    assert config.transport == {
        "type": "http",
        "url": "http://arg",
        "auth": {"type": "api_key", "apiKey": "conf-key"},
        "timeout": 1.5,
    }
    assert config.namespace == "default"


def test_a_url_argument_replaces_a_transport_of_another_type() -> None:
    config = resolve_config(
        {"spark.openlineage.transport.type": "console"}, {}, {"url": "http://arg"}
    )
    assert config.transport == {"type": "http", "url": "http://arg"}


def test_http_arguments_without_a_url_are_an_error() -> None:
    with pytest.raises(ConfigurationError, match="api_key: settings of an http transport"):
        resolve_config({}, {}, {"api_key": "k"})


def test_nothing_configured_leaves_the_transport_to_the_client() -> None:
    assert resolve_config({}, {}, {}).transport is None


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"spark.openlineage.disabled": "perhaps"}, "spark.openlineage.disabled: expected"),
        ({"spark.openlineage.parentJobName": "x"}, "go together"),
        ({"spark.openlineage.emitter.queueSize": "0"}, "queueSize: must be positive"),
    ],
)
def test_bad_values_name_their_key(conf: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        resolve_config(conf, {}, {})


def test_disabled_from_environment() -> None:
    assert resolve_config({}, {"OPENLINEAGE_DISABLED": "true"}, {}).disabled is True


def test_read_only_actions_are_filtered_unless_turned_on() -> None:
    assert resolve_config({}, {}, {}).report_read_only_actions is False
    key = "spark.openlineage.emitter.reportReadOnlyActions"
    assert resolve_config({key: "true"}, {}, {}).report_read_only_actions is True
    overridden = resolve_config({key: "true"}, {}, {"report_read_only_actions": False})
    assert overridden.report_read_only_actions is False
    with pytest.raises(ConfigurationError, match=key):
        resolve_config({key: "sometimes"}, {}, {})


def test_running_interval_defaults_to_ten_seconds_and_must_be_positive() -> None:
    key = "spark.openlineage.emitter.runningIntervalSeconds"
    assert resolve_config({}, {}, {}).running_interval == 10.0
    assert resolve_config({key: "2.5"}, {}, {}).running_interval == 2.5
    with pytest.raises(ConfigurationError, match=f"{key}: must be positive"):
        resolve_config({key: "0"}, {}, {})


def test_column_lineage_is_dataset_level_unless_the_official_option_turns_it_off() -> None:
    # The official integration's default since 1.x (SparkOpenLineageConfig: true in 1.53).
    key = "spark.openlineage.columnLineage.datasetLineageEnabled"
    assert resolve_config({}, {}, {}).dataset_lineage_enabled is True
    assert resolve_config({key: "false"}, {}, {}).dataset_lineage_enabled is False
    overridden = resolve_config({key: "false"}, {}, {"dataset_lineage_enabled": True})
    assert overridden.dataset_lineage_enabled is True
    turned_off = resolve_config({}, {}, {"dataset_lineage_enabled": False})
    assert turned_off.dataset_lineage_enabled is False
    with pytest.raises(ConfigurationError, match=key):
        resolve_config({key: "maybe"}, {}, {})
