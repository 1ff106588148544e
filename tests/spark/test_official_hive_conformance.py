"""Our events for the official Spark integration's Hive scenarios, field by field.

``tests/spark/hive_scenarios.py`` runs the statements of the official scenario scripts
(CREATE TABLE AS SELECT ``USING hive``, LOAD DATA, column lineage across a join and an
aggregate, INSERT OVERWRITE DIRECTORY in its Hive forms) in a Hive-enabled session of its
own; each test checks our events against that scenario's expected event in the OpenLineage
repository (``integration/spark/app/integrations/container/*.json``), written here as
facts with the scenario's /tmp paths moved under the work directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import completed, schema_fields, table_symlink
from tests.support.paths import REPO

pytestmark = [pytest.mark.spark, pytest.mark.slow]

APP = "open_lineage_hive_scenarios"


Events = list[dict[str, Any]]


@pytest.fixture(scope="module")
def hive_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Events]:
    """The work directory the scenarios wrote under, and the events the emitter wrote to
    its events.jsonl through the client's file transport."""
    workdir = tmp_path_factory.mktemp("hive")
    log = workdir / "scenarios.log"
    with log.open("wb") as output:
        finished = subprocess.run(
            [sys.executable, "-m", "tests.spark.hive_scenarios", str(workdir)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=900,
            check=False,
        )
    assert finished.returncode == 0, log.read_text()[-4000:]
    lines = (workdir / "events.jsonl").read_text().splitlines()
    return workdir, [json.loads(line) for line in lines if line.strip()]


def _lineage(dataset: dict[str, Any]) -> dict[str, list[tuple[str, str, list[str]]]]:
    """field → [(input dataset, input field, [TYPE/SUBTYPE, ...])], in the facet's order."""
    return {
        name: [
            (
                i["name"],
                i["field"],
                [
                    f"{t['type']}/{t['subtype']}" + ("/masking" if t["masking"] else "")
                    for t in i["transformations"]
                ],
            )
            for i in entry["inputFields"]
        ]
        for name, entry in dataset["facets"]["columnLineage"]["fields"].items()
    }


def test_ctas_using_hive_matches_the_official_ctas_event_with_column_lineage(
    hive_run: tuple[Path, Events],
) -> None:
    workdir, events = hive_run
    # pysparkCTASEnd.json and pysparkCTASWithColumnLineageEnd.json: job
    # "<app>.execute_create_hive_table_as_select_command" (we append the created table, as
    # the official does for a data source CTAS: hiveCreateDataSourceAsSelectCommand...json).
    event = completed(events, f"{APP}.execute_create_hive_table_as_select_command.default_tbl1")
    temp, table = f"{workdir}/ctas_load/temp", f"{workdir}/ctas_load/tbl1"
    (source,) = event["inputs"]
    assert (source["namespace"], source["name"]) == ("file", temp)
    assert schema_fields(source) == [("a", "long"), ("b", "long")]
    (output,) = event["outputs"]
    assert (output["namespace"], output["name"]) == ("file", table)
    assert schema_fields(output) == [("a", "long"), ("b", "long")]
    assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"
    assert table_symlink(output) == (f"file:{workdir}/ctas_load", "default.tbl1", "TABLE")
    assert _lineage(output) == {
        "a": [(temp, "a", ["DIRECT/IDENTITY"])],
        "b": [(temp, "b", ["DIRECT/IDENTITY"])],
    }


def test_load_data_matches_the_official_load_event(
    hive_run: tuple[Path, Events],
) -> None:
    workdir, events = hive_run
    # pysparkLoadComplete.json names the job "<app>.execute_load_data_command.default_tbl1"
    # (the table's identifier); ours is named after the table location's last two parts,
    # "ctas_load_tbl1" — a difference listed in docs/spark-conformance.md (load_data, job
    # name). As there: no inputs, the table by location with its schema and symlink
    # file:/tmp/ctas_load + default.tbl1.
    event = completed(events, f"{APP}.execute_load_data_command.ctas_load_tbl1")
    assert event["inputs"] == []
    (output,) = event["outputs"]
    assert (output["namespace"], output["name"]) == ("file", f"{workdir}/ctas_load/tbl1")
    assert output["facets"]["dataSource"]["name"] == "file"
    assert schema_fields(output) == [("a", "long"), ("b", "long")]
    assert table_symlink(output) == (f"file:{workdir}/ctas_load", "default.tbl1", "TABLE")
    assert "lifecycleStateChange" not in output["facets"]


def test_column_lineage_matches_the_official_cll_event_transformation_for_transformation(
    hive_run: tuple[Path, Events],
) -> None:
    workdir, events = hive_run
    # spark_cll.py / pysparkCLLEnd.json: a CTAS over a filtered subquery joined and grouped.
    event = completed(events, f"{APP}.execute_create_hive_table_as_select_command.default_cll_tbl1")
    source1, source2 = f"{workdir}/ctas_load/cll_source1", f"{workdir}/ctas_load/cll_source2"
    assert [(i["name"], schema_fields(i)) for i in event["inputs"]] == [
        (source2, [("a", "integer"), ("c", "integer")]),
        (source1, [("a", "integer"), ("b", "string")]),
    ]
    (output,) = event["outputs"]
    assert output["name"] == f"{workdir}/cll_test/tbl1"
    assert schema_fields(output) == [("ident", "integer"), ("trans", "string"), ("agg", "long")]
    # Every field lists the GROUP BY, the JOIN and the WHERE — including the filter on
    # cll_source1.a that only the optimizer infers (from the join with a > 1).
    rows_decided_by = [
        (source1, "a", ["INDIRECT/GROUP_BY", "INDIRECT/JOIN", "INDIRECT/FILTER"]),
        (source1, "b", ["INDIRECT/GROUP_BY"]),
        (source2, "a", ["INDIRECT/JOIN", "INDIRECT/FILTER"]),
    ]
    lineage = {name: sorted(inputs) for name, inputs in _lineage(output).items()}
    assert lineage == {
        "ident": sorted(
            [
                (source1, "a", ["DIRECT/IDENTITY", *rows_decided_by[0][2]]),
                rows_decided_by[1],
                rows_decided_by[2],
            ]
        ),
        "trans": sorted(
            [
                rows_decided_by[0],
                (source1, "b", ["DIRECT/TRANSFORMATION", "INDIRECT/GROUP_BY"]),
                rows_decided_by[2],
            ]
        ),
        "agg": sorted([*rows_decided_by, (source2, "c", ["DIRECT/AGGREGATION"])]),
    }
    for field in output["facets"]["columnLineage"]["fields"].values():
        for column in field["inputFields"]:
            assert all(t["description"] == "" for t in column["transformations"])


def test_insert_overwrite_directory_in_hive_forms_matches_the_official_event(
    hive_run: tuple[Path, Events],
) -> None:
    workdir, events = hive_run
    # pysparkHiveOverwriteDirCompleteEvent.json: job
    # "<app>.execute_insert_into_hive_dir_command.overwrite_table", no inputs (VALUES), the
    # directory by path with schema col1 integer, col2 string and lifecycle OVERWRITE.
    event = completed(events, f"{APP}.execute_insert_into_hive_dir_command.overwrite_table")
    assert event["inputs"] == []
    (output,) = event["outputs"]
    assert (output["namespace"], output["name"]) == ("file", f"{workdir}/overwrite/table")
    assert schema_fields(output) == [("col1", "integer"), ("col2", "string")]
    assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    # STORED AS textfile, without USING: the same command, reading the table it selects from.
    event = completed(events, f"{APP}.execute_insert_into_hive_dir_command.overwrite_stored")
    assert [i["name"] for i in event["inputs"]] == [f"{workdir}/ctas_load/temp"]
    (output,) = event["outputs"]
    assert output["name"] == f"{workdir}/overwrite/stored"
    assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
