"""``lineage-proxy rules check`` and ``rules test`` (in-process: same code as the script)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from proxy.cli.main import main
from proxy.kafka.keys import key_function
from routing_rules.transforms import REDACTED
from tests.support.paths import REPO
from tests.support.sample_events import rich_run_event, run_event

EXAMPLES = REPO / "routing_rules" / "examples"


def test_check_accepts_a_good_file(capsys):
    assert main(["rules", "check", str(EXAMPLES / "per-team-topics.yaml")]) == 0
    assert "per-team-topics.yaml: ok (3 rules, 4 destinations)" in capsys.readouterr().out


def test_check_defaults_to_the_rules_named_by_the_config(capsys):
    assert main(["rules", "check", "--config", str(REPO / "config.yaml")]) == 0
    assert "routing_rules/default.yaml: ok (0 rules, 4 destinations)" in capsys.readouterr().out


def test_check_reports_file_line_and_reason_and_exits_1(tmp_path: Path, capsys):
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "version: 1\ndestinations: {}\nrules:\n  - to: [nowhere]\ndefault: {drop: true}\n"
    )
    assert main(["rules", "check", str(broken)]) == 1
    assert capsys.readouterr().err.strip() == (
        f"{broken}:4: rules.0.to.0: unknown destination 'nowhere' (none declared)"
    )


def test_dry_run_shows_rules_transforms_destinations_and_the_event_as_sent(tmp_path: Path, capsys):
    event = rich_run_event()
    running = run_event(event_type="RUNNING")
    invalid = run_event()
    del invalid["producer"]
    events = tmp_path / "events.json"
    events.write_bytes(orjson.dumps([event, invalid]))
    single = tmp_path / "running.json"
    single.write_bytes(orjson.dumps(running))
    rules = EXAMPLES / "redact-sql.yaml"
    # An invalid event in the input makes the dry run exit 1, as documented, yet every
    # event is still shown.
    assert main(["rules", "test", str(rules), str(events), str(single), "--json"]) == 1
    first, second, third = (orjson.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first["event_label"] == f"{events}[0]"
    assert first["matched"] == ["redact-sql"]
    assert first["transforms"][0] == {
        "rule": "redact-sql",
        "transform": "redact job.facets.sql.query",
        "changed": 1,
    }
    assert first["destinations"] == ["kafka (kafka)"] and first["default_route"]
    assert first["event"]["job"]["facets"]["sql"]["query"] == REDACTED
    assert second["valid"] is False and second["problems"][0]["pointer"] == "/producer"
    assert third["matched"] == [] and third["event"] == running

    assert main(["rules", "test", str(rules), str(events)]) == 1
    text = capsys.readouterr().out
    assert "matched: redact-sql" in text
    assert "transform [redact-sql] redact job.facets.sql.query: 1 changed" in text
    assert "destinations (default route): kafka (kafka)" in text
    assert f'"query": "{REDACTED}"' in text
    assert "invalid, the client gets 400:" in text and "/producer:" in text


def test_dry_run_of_valid_events_only_exits_0(tmp_path: Path, capsys):
    events = tmp_path / "events.json"
    events.write_bytes(orjson.dumps([rich_run_event(), run_event(event_type="RUNNING")]))
    assert main(["rules", "test", str(EXAMPLES / "redact-sql.yaml"), str(events), "--json"]) == 0
    assert [orjson.loads(line)["valid"] for line in capsys.readouterr().out.splitlines()] == [
        True,
        True,
    ]


def test_dry_run_shows_drops_and_throttling(tmp_path: Path, capsys):
    run_id = "0176a8c2-fe01-7439-87e6-56a1a1b4029f"
    flink = [run_event(event_type="RUNNING", run_id=run_id) for _ in range(2)]
    for event in flink:
        event["producer"] = "https://github.com/apache/flink"
    events = tmp_path / "flink.json"
    events.write_bytes(orjson.dumps([*flink, run_event(event_type="RUNNING")]))
    assert main(["rules", "test", str(EXAMPLES / "drop-running.yaml"), str(events)]) == 0
    text = capsys.readouterr().out
    assert "dropped by: flink-running (throttle)" in text
    assert "dropped by: other-running" in text
    assert text.count("destinations: kafka (kafka)") == 1


def test_dry_run_with_a_broken_rules_file_or_unreadable_event_exits_1(tmp_path: Path, capsys):
    broken = tmp_path / "broken.yaml"
    broken.write_text("version: 1\n")
    assert main(["rules", "test", str(broken), "x.json"]) == 1
    assert f"{broken}:1: default: Field required" in capsys.readouterr().out
    assert (
        main(["rules", "test", str(EXAMPLES / "redact-sql.yaml"), str(tmp_path / "no.json")]) == 1
    )
    assert "no.json: cannot read an event" in capsys.readouterr().err


def test_dry_run_repairs_like_the_proxy_and_strict_config_refuses(tmp_path: Path, capsys):
    naive = rich_run_event()
    naive["eventTime"] = "2026-11-23T10:00:00"
    events = tmp_path / "naive.json"
    events.write_bytes(orjson.dumps(naive))
    rules = str(EXAMPLES / "redact-sql.yaml")

    assert main(["rules", "test", rules, str(events), "--json"]) == 0
    outcome = orjson.loads(capsys.readouterr().out)
    assert outcome["valid"] is True
    assert outcome["repaired"] == [
        {
            "repair": "naive_date_time",
            "pointer": "/eventTime",
            "from": "2026-11-23T10:00:00",
            "to": "2026-11-23T10:00:00Z",
        }
    ]
    assert outcome["event"]["eventTime"] == "2026-11-23T10:00:00Z"
    assert main(["rules", "test", rules, str(events)]) == 0
    assert (
        "repaired [naive_date_time] /eventTime: 2026-11-23T10:00:00 → " in capsys.readouterr().out
    )

    strict = tmp_path / "strict.yaml"
    strict.write_text("validation:\n  mode: strict\n")
    assert main(["rules", "test", rules, str(events), "--config", str(strict)]) == 1
    assert "invalid, the client gets 400:" in capsys.readouterr().out


def test_dry_run_names_the_topic_and_key_the_archive_partition_and_the_http_url(
    tmp_path: Path, capsys
):
    event = rich_run_event()
    event["eventTime"] = "2026-11-23T10:00:00Z"
    events = tmp_path / "event.json"
    events.write_bytes(orjson.dumps(event))
    key = key_function("run")(event)
    assert key is not None

    assert main(["rules", "test", str(EXAMPLES / "archive-everything.yaml"), str(events)]) == 0
    text = capsys.readouterr().out
    assert f"kafka (kafka): topic openlineage.events, key {key}" in text
    namespace = event["job"]["namespace"]
    assert (
        f"archive (archive): directory var/archive/all, "
        f"partition dt=2026-11-23/namespace={namespace}" in text
    )

    config = tmp_path / "config.yaml"
    config.write_text("kafka:\n  topic: lineage.all\nrouting:\n  archive_root: /data/ol\n")
    args = [str(EXAMPLES / "archive-everything.yaml"), str(events), "--json"]
    assert main(["rules", "test", *args, "--config", str(config)]) == 0
    assert orjson.loads(capsys.readouterr().out)["deliveries"] == [
        {"name": "kafka", "kind": "kafka", "topic": "lineage.all", "key": key},
        {
            "name": "archive",
            "kind": "archive",
            "directory": "/data/ol/all",
            "partition": f"dt=2026-11-23/namespace={namespace}",
        },
    ]

    # The rejected route gets the envelope: no job to key by, filed under the job's namespace.
    del event["producer"]
    events.write_bytes(orjson.dumps(event))
    assert main(["rules", "test", str(REPO / "routing_rules" / "default.yaml"), str(events)]) == 1
    text = capsys.readouterr().out
    assert "rejected (kafka): topic openlineage.events.rejected, key (none)" in text
    assert "directory var/archive/rejected, partition dt=" in text
    assert "/namespace=team-a\n" in text

    spark = rich_run_event()
    spark["producer"] = "https://github.com/OpenLineage/OpenLineage/tree/1.40.0/integration/spark"
    events.write_bytes(orjson.dumps(spark))
    assert main(["rules", "test", str(EXAMPLES / "spark-to-marquez.yaml"), str(events)]) == 0
    assert "marquez (http): target marquez, url http://marquez:5000/api/v1/lineage" in (
        capsys.readouterr().out
    )


def test_dry_run_names_the_bucket_and_prefix_of_an_object_archive(tmp_path: Path, capsys):
    """``rules test`` crashed with an AssertionError on an object_archive destination that
    ``rules check`` accepts (the dry run knew kafka, archive and http only)."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "version: 1\ndestinations:\n"
        "  bucket: {kind: object_archive, bucket: lineage-archive, prefix: events/v1}\n"
        "rules: []\ndefault: {to: [bucket]}\n"
    )
    event = rich_run_event()
    event["eventTime"] = "2026-11-23T10:00:00Z"
    events = tmp_path / "event.json"
    events.write_bytes(orjson.dumps(event))
    assert main(["rules", "test", str(rules), str(events), "--json"]) == 0
    namespace = event["job"]["namespace"]
    assert orjson.loads(capsys.readouterr().out)["deliveries"] == [
        {
            "name": "bucket",
            "kind": "object_archive",
            "bucket": "lineage-archive",
            "prefix": f"events/v1/dt=2026-11-23/namespace={namespace}/",
        }
    ]


PER_TEAM = str(EXAMPLES / "per-team-topics.yaml")


def write_cases(tmp_path: Path, text: str) -> Path:
    cases = tmp_path / "team.cases.yaml"
    cases.write_text(text)
    return cases


def test_rules_cases_that_hold_pass_and_exit_0(tmp_path: Path, capsys):
    payments = run_event(namespace="payments")
    (tmp_path / "payments.json").write_bytes(orjson.dumps(payments))
    running = orjson.dumps(run_event(namespace="sales", event_type="RUNNING")).decode()
    cases = write_cases(
        tmp_path,
        "cases:\n"
        "  - name: from a file\n"
        "    event: payments.json\n"
        "    expect:\n"
        "      destinations: [payments]\n"
        "      dropped: false\n"
        "      fields: {job.namespace: payments, /run/runId: " + payments["run"]["runId"] + "}\n"
        "  - name: inline\n"
        f"    event: {running}\n"
        "    expect: {destinations: [shared], rejected: false, fields: {run.facets.x: null}}\n",
    )
    # A path that leads nowhere is not null: the last field above must fail.
    assert main(["rules", "test", PER_TEAM, "--cases", str(cases)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "PASS from a file"
    assert out[1] == "FAIL inline: run.facets.x: expected null, got (missing)"

    cases.write_text(cases.read_text().replace(", fields: {run.facets.x: null}", ""))
    assert main(["rules", "test", PER_TEAM, "--cases", str(cases)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "PASS from a file",
        "PASS inline",
        f"{cases}: 2 passed, 0 failed",
    ]


def test_rules_cases_that_fail_show_the_difference_and_exit_1(tmp_path: Path, capsys):
    invalid = run_event(namespace="payments")
    del invalid["producer"]
    cases = write_cases(
        tmp_path,
        "cases:\n"
        "  - name: wrong topic\n"
        f"    event: {orjson.dumps(run_event(namespace='marketing')).decode()}\n"
        "    expect: {destinations: [payments], dropped: true, fields: {job.namespace: sales}}\n"
        "  - name: not rejected\n"
        f"    event: {orjson.dumps(invalid).decode()}\n"
        "    expect: {rejected: false}\n",
    )
    assert main(["rules", "test", PER_TEAM, "--cases", str(cases)]) == 1
    wrong, rejected, summary = capsys.readouterr().out.splitlines()
    assert wrong == (
        "FAIL wrong topic: dropped: expected true, got false; "
        "destinations: expected [payments], got [marketing]; "
        'job.namespace: expected "sales", got "marketing"'
    )
    assert rejected.startswith("FAIL not rejected: rejected: expected false, got true (/producer:")
    assert summary == f"{cases}: 0 passed, 2 failed"


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("cases:\n  - name: a\n    event: {}\n    expect: {destination: [x]}\n", 4, "unknown key"),
        (
            "cases:\n  - name: a\n    event: {}\n    expect:\n      destinations: [nope]\n",
            5,
            "unknown destination 'nope'",
        ),
        ("cases:\n  - name: a\n    event: missing.json\n    expect: {}\n", 3, "cannot read"),
        (
            "cases:\n  - name: a\n    event: {}\n    expect: {fields: {a..b: 1}}\n",
            4,
            "empty segment",
        ),
        (
            "cases:\n  - name: a\n    event: {}\n    expect: {}\n  - name: a\n    event: {}\n"
            "    expect: {}\n",
            5,
            "duplicate case name",
        ),
        ("cases: [\n", 2, "invalid YAML"),
    ],
)
def test_malformed_rules_cases_exit_2_naming_file_and_line(
    tmp_path: Path, capsys, text: str, line: int, reason: str
):
    cases = write_cases(tmp_path, text)
    assert main(["rules", "test", PER_TEAM, "--cases", str(cases)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"{cases}:{line}: ") and reason in captured.err


def test_rules_test_wants_events_or_cases(tmp_path: Path, capsys):
    assert main(["rules", "test", PER_TEAM]) == 2
    assert "give EVENT.json files or --cases FILE" in capsys.readouterr().err


EXAMPLE_CASES = sorted(EXAMPLES.glob("*.cases.yaml"))


def test_there_is_an_example_rules_cases_file():
    assert EXAMPLES / "per-team-topics.cases.yaml" in EXAMPLE_CASES


@pytest.mark.parametrize("cases", EXAMPLE_CASES, ids=lambda p: p.name)
def test_every_example_rules_cases_file_passes(cases: Path, capsys):
    rules = cases.with_name(cases.name.removesuffix(".cases.yaml") + ".yaml")
    assert main(["rules", "test", str(rules), "--cases", str(cases)]) == 0, capsys.readouterr()
    assert capsys.readouterr().out.endswith(" 0 failed\n")
