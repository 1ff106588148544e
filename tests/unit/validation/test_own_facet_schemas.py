"""The custom facets our own Spark emitter sends: schema shipped, URL real, strict accepts."""

from __future__ import annotations

import re
from typing import Any

from proxy.validation import EventValidator
from spark_emitter.events import (
    AppContext,
    ApplicationDetails,
    JobDetails,
    JobRef,
    action_event,
    action_run,
    application_event,
)
from spark_emitter.execution import ExecutionFacts, WriteFacts
from spark_emitter.run_ids import uuid7
from tests.support.paths import REPO

# Where our own facets' schemas live, as named in their _schemaURL.
OWN_URL = re.compile(r"https://github\.com/lineage-proxy/lineage-proxy/blob/main/([^#]+)#.*")


def _app() -> AppContext:
    return AppContext(
        namespace="spark-tests",
        app_name="sales_etl",
        app_run_id=uuid7(),
        spark_version="4.0.1",
        spark_properties={"spark.master": "local[2]", "spark.app.name": "Sales ETL"},
        parent=JobRef("airflow", "dag_x.task_y", uuid7()),
        details=ApplicationDetails("local[2]", "Sales ETL", "local-17", "client", "ann"),
    )


def _app_event() -> dict[str, Any]:
    return application_event(_app(), "START", 1_795_000_000_000)


def _running_event() -> dict[str, Any]:
    facts = ExecutionFacts(1, "unknown", "Execute X", 1, 1, None, write=WriteFacts(("file", "/o")))
    app = _app()
    job = JobDetails(4, "nightly load", None, "collect at etl.py:12")
    return action_event(app, action_run(app, facts), facts, "RUNNING", 2, job)


def _custom_facets(event: dict[str, Any]) -> dict[str, dict[str, Any]]:
    facets = {**event["run"]["facets"], **event["job"]["facets"]}
    return {k: f for k, f in facets.items() if "openlineage.io" not in f["_schemaURL"]}


def test_every_custom_facet_of_the_emitter_names_a_schema_file_in_this_repository():
    custom = {**_custom_facets(_app_event()), **_custom_facets(_running_event())}
    assert set(custom) == {"spark_properties", "spark_applicationDetails", "spark_jobDetails"}
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


def test_strict_mode_checks_the_spark_application_and_job_details_facets():
    strict = EventValidator(strict=True)
    app_event, running = _app_event(), _running_event()
    assert strict.validate(app_event) == [] and strict.validate(running) == []
    details = app_event["run"]["facets"]["spark_applicationDetails"]
    assert (details["appName"], details["applicationId"], details["userName"]) == (
        "Sales ETL",
        "local-17",
        "ann",
    )
    assert "proxyUrl" not in details  # left out when unknown, not null
    job = running["run"]["facets"]["spark_jobDetails"]
    assert job == {
        "_producer": job["_producer"],
        "_schemaURL": job["_schemaURL"],
        "jobId": 4,
        "jobDescription": "nightly load",
        "jobCallSite": "collect at etl.py:12",
    }
    del details["applicationId"]
    job["jobId"] = "4"
    assert [i.pointer for i in strict.validate(app_event)] == [
        "/run/facets/spark_applicationDetails"
    ]
    assert [i.pointer for i in strict.validate(running)] == ["/run/facets/spark_jobDetails/jobId"]
