"""Named repairs: each one's before/after, the pipeline's use of them, and strict mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from proxy.auth.principal import ANONYMOUS
from proxy.config.settings import ValidationConfig
from proxy.ingest.pipeline import Accepted, BestEffortQueue, EventPipeline, Rejection
from proxy.metrics.process import ProxyMetrics
from proxy.openlineage.repaired import RepairedEvent
from proxy.validation import EventValidator
from proxy.validation.repairs import REPAIR_NAMES, EventRepairer
from tests.support.sample_events import dataset_event, facet, rich_run_event

Setter = Callable[[dict[str, Any], str], None]


def _set_event_time(event: dict[str, Any], value: str) -> None:
    event["eventTime"] = value


def _set_nominal_start(event: dict[str, Any], value: str) -> None:
    event["run"]["facets"]["nominalTime"]["nominalStartTime"] = value


def _set_nominal_end(event: dict[str, Any], value: str) -> None:
    event["run"]["facets"]["nominalTime"]["nominalEndTime"] = value


def _set_input_source(event: dict[str, Any], value: str) -> None:
    event["inputs"][0]["facets"]["dataSource"]["uri"] = value


def _set_local_input_source(event: dict[str, Any], value: str) -> None:
    event["inputs"][0]["namespace"] = "file"
    event["inputs"][0]["name"] = "/data/orders.csv"
    event["inputs"][0]["facets"]["dataSource"] = facet(
        "DatasourceDatasetFacet", name="file", uri=value
    )


# (repair, where, setter, sent value, forwarded value)
TABLE = [
    (
        "naive_date_time",
        "/eventTime",
        _set_event_time,
        "2026-11-23T10:00:00.123456",
        "2026-11-23T10:00:00.123456Z",
    ),
    (
        "naive_date_time",
        "/eventTime",
        _set_event_time,
        "2026-11-23 10:00:00",
        "2026-11-23T10:00:00Z",
    ),
    (
        "naive_date_time",
        "/run/facets/nominalTime/nominalStartTime",
        _set_nominal_start,
        "2026-11-23T00:00:00",
        "2026-11-23T00:00:00Z",
    ),
    (
        "date_only_nominal_time",
        "/run/facets/nominalTime/nominalStartTime",
        _set_nominal_start,
        "2020-01-01",
        "2020-01-01T00:00:00Z",
    ),
    (
        "date_only_nominal_time",
        "/run/facets/nominalTime/nominalEndTime",
        _set_nominal_end,
        "2020-01-02",
        "2020-01-02T00:00:00Z",
    ),
    (
        "schemeless_datasource_uri",
        "/inputs/0/facets/dataSource/uri",
        _set_input_source,
        "/data/orders 2026.csv",
        "file:///data/orders%202026.csv",
    ),
    (
        "schemeless_datasource_uri",
        "/inputs/0/facets/dataSource/uri",
        _set_input_source,
        "raw-bucket",
        "s3://raw-bucket",  # the dataset's namespace, a URI
    ),
    (
        "schemeless_datasource_uri",
        "/inputs/0/facets/dataSource/uri",
        _set_local_input_source,
        "file",  # what openlineage-spark writes for local files
        "file:///",
    ),
    (
        "schemeless_datasource_uri",
        "/inputs/0/facets/dataSource/uri",
        _set_local_input_source,
        "./data/x 1.csv",  # Apache Hamilton: relative to where the pipeline ran
        "file:data/x%201.csv",
    ),
    (
        "schemeless_datasource_uri",
        "/inputs/0/facets/dataSource/uri",
        _set_input_source,
        "../shared/orders.csv",  # relative even beside a namespace that is a URI
        "file:../shared/orders.csv",
    ),
    (
        "schemeless_datasource_uri",
        "/inputs/0/facets/dataSource/uri",
        _set_local_input_source,
        "data/orders.csv",
        "file:data/orders.csv",
    ),
]
IDS = [f"{row[0]}:{row[3]}" for row in TABLE]


def _pipeline(validation: ValidationConfig) -> EventPipeline:
    metrics = ProxyMetrics()
    zones = validation.naive_time_zones()
    return EventPipeline(
        EventValidator(strict=validation.is_strict),
        router=None,  # type: ignore[arg-type]  # check() never routes
        metrics=metrics,
        best_effort=BestEffortQueue(1, 1, metrics),
        repairer=EventRepairer(validation.enabled_repairs(), zones),
    )


def _read(event: dict[str, Any], pointer: str) -> Any:
    node: Any = event
    for token in pointer.split("/")[1:]:
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node


@pytest.mark.parametrize(("repair", "where", "setter", "sent", "forwarded"), TABLE, ids=IDS)
def test_repairable_value_is_forwarded_repaired_and_named(
    repair: str, where: str, setter: Setter, sent: str, forwarded: str
) -> None:
    event = rich_run_event()
    setter(event, sent)
    pipeline = _pipeline(ValidationConfig())
    assert pipeline.validator.validate(event), "the value sent must break the spec"

    outcome = pipeline.check(event, ANONYMOUS)

    assert isinstance(outcome, Accepted)
    assert isinstance(outcome.event, RepairedEvent)
    assert _read(outcome.event, where) == forwarded
    assert [r.as_json() for r in outcome.repairs] == [
        {"repair": repair, "pointer": where, "from": sent, "to": forwarded}
    ]
    assert _read(event, where) == sent, "the client's event itself is left as it came"
    assert pipeline.validator.validate(outcome.event) == []
    counted = pipeline.metrics.repaired.labels(repair)._value.get()
    assert counted == 1


@pytest.mark.parametrize(("repair", "where", "setter", "sent", "forwarded"), TABLE, ids=IDS)
@pytest.mark.parametrize(
    "validation",
    [ValidationConfig(mode="strict"), ValidationConfig(strict=True)],
    ids=["mode-strict", "strict-true"],
)
def test_strict_mode_refuses_every_repairable_value_with_its_pointer(
    repair: str, where: str, setter: Setter, sent: str, forwarded: str, validation: ValidationConfig
) -> None:
    event = rich_run_event()
    setter(event, sent)

    outcome = _pipeline(validation).check(event, ANONYMOUS)

    assert isinstance(outcome, Rejection)
    assert outcome.status == 400
    assert [d["pointer"] for d in outcome.details] == [where]


@pytest.mark.parametrize("repair", REPAIR_NAMES)
def test_switched_off_repair_refuses_what_it_would_repair(repair: str) -> None:
    others = [name for name in REPAIR_NAMES if name != repair]
    pipeline = _pipeline(ValidationConfig(repairs=others))
    for name, where, setter, sent, _ in TABLE:
        if name != repair:
            continue
        event = rich_run_event()
        setter(event, sent)
        outcome = pipeline.check(event, ANONYMOUS)
        assert isinstance(outcome, Rejection), (name, sent)
        assert [d["pointer"] for d in outcome.details] == [where]


def test_repairs_in_several_places_are_all_listed() -> None:
    event = rich_run_event()
    _set_event_time(event, "2026-11-23T10:00:00")
    _set_nominal_start(event, "2020-01-01")
    _set_input_source(event, "/data/x.csv")

    outcome = _pipeline(ValidationConfig()).check(event, ANONYMOUS)

    assert isinstance(outcome, Accepted)
    assert {r.name for r in outcome.repairs} == set(REPAIR_NAMES)


def test_event_with_one_unrepairable_issue_is_refused_with_every_original_pointer() -> None:
    event = rich_run_event()
    _set_event_time(event, "2026-11-23T10:00:00")
    event["run"]["runId"] = "not-a-uuid"

    outcome = _pipeline(ValidationConfig()).check(event, ANONYMOUS)

    assert isinstance(outcome, Rejection)
    assert sorted(d["pointer"] for d in outcome.details) == ["/eventTime", "/run/runId"]


@pytest.mark.parametrize(
    ("setter", "sent"),
    [
        (_set_event_time, "2020-01-01"),  # a date-only eventTime: when in the day?
        (_set_event_time, "2026-02-30T10:00:00"),  # repaired form is still no real day
        (_set_event_time, "yesterday"),
        (_set_input_source, "relative/orders.csv"),  # namespace s3://… would be a guess
    ],
)
def test_values_no_repair_fits_are_refused(setter: Setter, sent: str) -> None:
    event = rich_run_event()
    if setter is _set_input_source:
        event["inputs"][0]["namespace"] = "warehouse"
    setter(event, sent)

    assert isinstance(_pipeline(ValidationConfig()).check(event, ANONYMOUS), Rejection)


def test_dataset_event_with_bare_path_datasource_is_repaired() -> None:
    event = dataset_event(namespace="file", name="/data/orders.csv")
    event["dataset"]["facets"] = {
        "dataSource": facet("DatasourceDatasetFacet", name="file", uri="/data")
    }

    outcome = _pipeline(ValidationConfig()).check(event, ANONYMOUS)

    assert isinstance(outcome, Accepted)
    assert outcome.event["dataset"]["facets"]["dataSource"]["uri"] == "file:///data"


def test_valid_event_is_accepted_as_it_came_without_repairs() -> None:
    event = rich_run_event()
    outcome = _pipeline(ValidationConfig()).check(event, ANONYMOUS)
    assert isinstance(outcome, Accepted)
    assert outcome.event is event
    assert outcome.repairs == ()


@pytest.mark.parametrize(
    ("zones", "producer", "sent", "forwarded"),
    [
        ({}, "https://x", "2026-11-23T10:00:00.5", "2026-11-23T10:00:00.5Z"),  # the default
        (
            {"naive_time_zone": "Europe/Berlin"},
            "https://x",
            "2026-11-23T10:00:00",
            "2026-11-23T10:00:00+01:00",
        ),
        (
            {"naive_time_zone": "Europe/Berlin"},
            "https://x",
            "2026-07-01 10:00:00",
            "2026-07-01T10:00:00+02:00",
        ),
        (
            {"naive_time_zone": "America/St_Johns"},
            "https://x",
            "2026-11-23T10:00:00",
            "2026-11-23T10:00:00-03:30",
        ),
        (
            {
                "naive_time_zone": "Europe/Berlin",
                "naive_time_zones_by_producer": {
                    "https://github.com/OpenLineage": "Asia/Tokyo",
                    "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/integration/dbt": "UTC",
                },
            },
            "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/integration/dbt",
            "2026-11-23T10:00:00",
            "2026-11-23T10:00:00Z",  # the longest prefix wins
        ),
        (
            {"naive_time_zones_by_producer": {"https://github.com/OpenLineage": "Asia/Tokyo"}},
            "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/integration/airflow",
            "2026-11-23T10:00:00",
            "2026-11-23T10:00:00+09:00",
        ),
    ],
)
def test_naive_times_are_read_in_the_configured_zone(
    zones: dict[str, Any], producer: str, sent: str, forwarded: str
) -> None:
    event = rich_run_event()
    event["producer"] = producer
    event["eventTime"] = sent

    outcome = _pipeline(ValidationConfig(**zones)).check(event, ANONYMOUS)

    assert isinstance(outcome, Accepted), outcome
    assert outcome.event["eventTime"] == forwarded


def test_an_unknown_naive_time_zone_is_a_config_error(tmp_path) -> None:
    from proxy.config.settings import ConfigError, load_config

    path = tmp_path / "config.yaml"
    path.write_text("validation:\n  naive_time_zone: Mars/Olympus\n")
    with pytest.raises(
        ConfigError, match=r"config.yaml:2: validation.naive_time_zone: .*Mars/Olympus"
    ):
        load_config(path, environ={})
