"""The custom facets our own Spark emitter sends: schema shipped, URL real, strict accepts."""

from __future__ import annotations

import re
from typing import Any

from proxy.openlineage.run_ids import uuid7
from proxy.validation import EventValidator
from spark_emitter.events import AppContext, JobRef, application_event
from tests.conftest import REPO

# Where our own facets' schemas live, as named in their _schemaURL.
OWN_URL = re.compile(r"https://github\.com/lineage-proxy/lineage-proxy/blob/main/([^#]+)#.*")


def _app_event() -> dict[str, Any]:
    app = AppContext(
        namespace="spark-tests",
        app_name="sales_etl",
        app_run_id=uuid7(),
        spark_version="4.0.1",
        spark_properties={"spark.master": "local[2]", "spark.app.name": "Sales ETL"},
        parent=JobRef("airflow", "dag_x.task_y", uuid7()),
    )
    return application_event(app, "FAIL", 1_795_000_000_000, error="boom")


def _custom_facets(event: dict[str, Any]) -> dict[str, dict[str, Any]]:
    facets = {**event["run"]["facets"], **event["job"]["facets"]}
    return {k: f for k, f in facets.items() if "openlineage.io" not in f["_schemaURL"]}


def test_every_custom_facet_of_the_emitter_names_a_schema_file_in_this_repository():
    custom = _custom_facets(_app_event())
    assert set(custom) == {"spark_properties"}
    for key, facet in custom.items():
        match = OWN_URL.fullmatch(facet["_schemaURL"])
        assert match, (key, facet["_schemaURL"])
        assert (REPO / match[1]).is_file(), match[1]


def test_strict_mode_accepts_the_emitters_events_and_checks_its_own_facet():
    strict = EventValidator(strict=True)
    event = _app_event()
    assert strict.validate(event) == []
    event["run"]["facets"]["spark_properties"]["properties"]["spark.executor.cores"] = 4
    [issue] = strict.validate(event)
    assert issue.pointer == "/run/facets/spark_properties/properties/spark.executor.cores"
