"""compact and graph over archives written by the proxy's own ArchiveWriter."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
import zipfile
from pathlib import Path
from typing import Any

import orjson
import pyspark
import pytest
from pyspark.sql import SparkSession

from proxy.cli.main import main as cli_main
from proxy.destinations.archive.destination import ArchiveWriter
from spark_emitter.archive_jobs.compact import compact
from spark_emitter.archive_jobs.graph import build_graph
from tests.support.paths import REPO
from tests.support.sample_events import dataset_event, facet, run_event

pytestmark = pytest.mark.spark


async def _archive(directory: Path, events: list[dict[str, Any]]) -> None:
    writer = ArchiveWriter(directory)
    await writer.start()
    for event in events:
        await writer.write(event, orjson.dumps(event))
    await writer.close()


def _at(event: dict[str, Any], time: str) -> dict[str, Any]:
    event["eventTime"] = time
    return event


def _pipeline_events() -> tuple[list[dict[str, Any]], str, str]:
    """An application run with one child run that reads a and writes b, then fails."""
    app_id, child_id = str(uuid.uuid4()), str(uuid.uuid4())
    app = ("team-a", "nightly", app_id)
    child_start = _at(
        run_event(name="nightly.load", run_id=child_id, parent=app, root=app),
        "2026-11-22T23:59:58Z",
    )
    child_start["inputs"] = [{"namespace": "file", "name": "/data/a"}]
    child_start["run"]["facets"]["tags"] = facet("TagsRunFacet", tags=[{"key": "v", "value": "1"}])
    child_end = _at(
        run_event(name="nightly.load", event_type="FAIL", run_id=child_id, parent=app, root=app),
        "2026-11-23T00:00:03.5Z",
    )
    child_end["inputs"] = [{"namespace": "file", "name": "/data/a"}]
    child_end["run"]["facets"]["tags"] = facet("TagsRunFacet", tags=[{"key": "v", "value": "2"}])
    child_end["outputs"] = [
        {
            "namespace": "s3://bucket",
            "name": "b",
            "facets": {
                "columnLineage": facet(
                    "ColumnLineageDatasetFacet",
                    "1-2-0",
                    fields={
                        "total": {
                            "inputFields": [
                                {
                                    "namespace": "file",
                                    "name": "/data/a",
                                    "field": "amount",
                                    "transformations": [
                                        {"type": "DIRECT", "subtype": "AGGREGATION"}
                                    ],
                                }
                            ]
                        }
                    },
                    dataset=[
                        {
                            "namespace": "file",
                            "name": "/data/a",
                            "field": "region",
                            "transformations": [{"type": "INDIRECT", "subtype": "GROUP_BY"}],
                        }
                    ],
                )
            },
        }
    ]
    events = [
        _at(run_event(name="nightly", run_id=app_id), "2026-11-22T23:59:00Z"),
        child_start,
        child_end,
        _at(
            run_event(name="nightly", event_type="COMPLETE", run_id=app_id),
            "2026-11-23T00:01:00Z",
        ),
    ]
    return events, app_id, child_id


async def test_compact_is_partitioned_by_date_and_namespace_and_idempotent(
    spark: SparkSession, tmp_path: Path
) -> None:
    archive, out = tmp_path / "archive", str(tmp_path / "compacted")
    events, _, child_id = _pipeline_events()
    # A fixed time: its partition's date is asserted below (not the day the test runs).
    odd = _at(dataset_event(namespace="s3://bucket/with=odd:chars"), "2026-11-23T00:00:05Z")
    await _archive(archive, [*events, odd, events[0]])  # events[0] archived twice
    leftover = run_event(name="nightly.leftover")
    leftover["eventTime"] = "2026-11-23T00:00:09Z"
    (archive / "dt=2026-11-23" / "namespace=team-a" / "_half.jsonl.inprogress").write_bytes(
        orjson.dumps(leftover) + b"\n" + b'{"not": "finished'
    )

    first = compact(spark, str(archive), out)
    assert (first.read, first.added) == (5, 5)
    table = spark.read.parquet(out)
    rows = {(r.dt, r.namespace, r.event_type) for r in table.collect()}
    assert rows == {
        ("2026-11-22", "team-a", "START"),
        ("2026-11-22", "team-a", "START"),
        ("2026-11-23", "team-a", "FAIL"),
        ("2026-11-23", "team-a", "COMPLETE"),
        ("2026-11-23", "s3://bucket/with=odd:chars", None),
    }
    failed = table.filter("event_type = 'FAIL'").collect()[0]
    assert failed.run_id == child_id
    assert orjson.loads(failed.event) == events[2]
    assert str(failed.event_time) == "2026-11-23 00:00:03.500000"

    again = compact(spark, str(archive), out)
    assert (again.read, again.added) == (5, 0)
    assert spark.read.parquet(out).count() == 5

    # A new writer finalises the file a "crashed" writer left in progress, cut after its
    # last whole line: the leftover event is kept, the torn line never reaches a reader.
    later = run_event(name="nightly.more")
    await _archive(archive, [later])
    half = archive / "dt=2026-11-23" / "namespace=team-a" / "half.jsonl"
    assert half.read_bytes() == orjson.dumps(leftover) + b"\n"
    third = compact(spark, str(archive), out)
    assert (third.read, third.added) == (7, 2)
    assert spark.read.parquet(out).count() == 7


async def test_graph_builds_runs_edges_and_latest_facets(spark: SparkSession, tmp_path: Path):
    archive, out = tmp_path / "archive", tmp_path / "graph"
    events, app_id, child_id = _pipeline_events()
    await _archive(archive, events)

    result = build_graph(spark, str(archive), str(out))
    assert result.counts["runs"] == 2
    assert result.states == {"COMPLETE": 1, "FAIL": 1}

    runs = {r.run_id: r for r in spark.read.parquet(str(out / "runs")).collect()}
    child = runs[child_id]
    assert (child.job_name, child.state, child.events) == ("nightly.load", "FAIL", 2)
    assert child.duration_seconds == pytest.approx(5.5)
    assert (child.parent_run_id, child.parent_job_name) == (app_id, "nightly")
    assert runs[app_id].duration_seconds == pytest.approx(120)
    assert runs[app_id].parent_run_id is None

    edges = {
        (r.run_id, r.direction, r.dataset_namespace, r.dataset_name)
        for r in spark.read.parquet(str(out / "dataset_edges")).collect()
    }
    assert edges == {
        (child_id, "input", "file", "/data/a"),
        (child_id, "output", "s3://bucket", "b"),
    }
    columns = {
        (r.output_name, r.output_field, r.input_name, r.input_field, r.transformation_subtype)
        for r in spark.read.parquet(str(out / "column_edges")).collect()
    }
    assert columns == {
        ("b", "total", "/data/a", "amount", "AGGREGATION"),
        ("b", None, "/data/a", "region", "GROUP_BY"),
    }
    tags = (
        spark.read.parquet(str(out / "facets"))
        .filter(f"run_id = '{child_id}' AND facet_name = 'tags'")
        .collect()
    )
    assert len(tags) == 1
    assert orjson.loads(tags[0].facet)["tags"] == [{"key": "v", "value": "2"}]


def test_cli_runs_both_jobs_and_prints_summaries(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "archive"
    events, _, _ = _pipeline_events()
    asyncio.run(_archive(archive, events))

    assert (
        cli_main(["spark", "compact", "--archive", str(archive), "--out", str(tmp_path / "c")]) == 0
    )
    assert "4 event(s) read, 4 added" in capsys.readouterr().out
    assert (
        cli_main(["spark", "graph", "--archive", str(archive), "--out", str(tmp_path / "g")]) == 0
    )
    summary = capsys.readouterr().out
    assert "runs: 2 (1 COMPLETE, 1 FAIL) of 2 job(s)" in summary
    assert "column edges: 2" in summary
    # The CLI ran in the session that was already active and left it running.
    assert spark.range(1).count() == 1


async def test_compact_runs_unchanged_under_spark_submit(spark: SparkSession, tmp_path: Path):
    """As on a cluster: spark-submit, the package shipped with --py-files, URIs for paths."""
    archive = tmp_path / "archive"
    events, _, _ = _pipeline_events()
    await _archive(archive, events)
    package = tmp_path / "spark_emitter.zip"
    with zipfile.ZipFile(package, "w") as bundle:
        for source in (REPO / "spark_emitter").rglob("*.py"):
            bundle.write(source, source.relative_to(REPO))
    spark_home = Path(pyspark.__file__).parent
    out = (tmp_path / "compacted").as_uri()
    process = await asyncio.create_subprocess_exec(
        str(spark_home / "bin" / "spark-submit"),
        "--master",
        "local[1]",
        "--conf",
        "spark.ui.enabled=false",
        "--py-files",
        str(package),
        str(REPO / "spark_emitter" / "archive_jobs" / "compact.py"),
        "--archive",
        archive.as_uri(),
        "--out",
        out,
        cwd=tmp_path,  # not the repository: the code must come from --py-files
        env={
            **os.environ,
            "SPARK_HOME": str(spark_home),
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": "",
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=600)
    assert process.returncode == 0, stderr.decode()[-3000:]
    assert "4 event(s) read, 4 added" in stdout.decode()
    assert spark.read.parquet(out).count() == 4


def test_cli_rejects_a_directory_that_is_not_an_archive(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "flat.jsonl").write_text('{"eventType": "START"}\n')
    code = cli_main(["spark", "graph", "--archive", str(tmp_path), "--out", str(tmp_path / "g")])
    assert code == 1
    assert "not an archive" in capsys.readouterr().err


def test_empty_archive_compacts_to_nothing(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "archive").mkdir()
    assert compact(spark, str(tmp_path / "archive"), str(tmp_path / "out")).added == 0
    assert build_graph(spark, str(tmp_path / "missing"), str(tmp_path / "g")).counts == {}
