"""``lineage-proxy dlq list|show|redrive`` against dead letters a real daemon wrote.

A daemon delivering to a Marquez double dead-letters two refused events and one poison
message into ``<topic>.dlq`` of the real broker; the CLI then lists,
shows and re-drives them — to a consumer's target, to another topic, and to the topic
they came from — and every check reads what landed, and that the DLQ kept everything.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml

from proxy.openlineage import event_key
from proxy.server.embedded_broker import free_port
from tests.support.cli import run_cli
from tests.support.consumers import (
    FAST_RETRY,
    consumer_config,
    create_topic,
    metric,
    produce,
    running,
)
from tests.support.doubles.marquez_double import MarquezDouble
from tests.support.doubles.target_double import TargetDouble
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.paths import REPO
from tests.support.sample_events import run_event
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

KEY = "run:team-a/etl.daily"


async def _dlq(config: Path, *args: str) -> tuple[int, str, str]:
    """``lineage-proxy dlq ARGS --config CONFIG``: (exit code, stdout, stderr)."""
    return await run_cli("dlq", *args, "--config", str(config))


def _config_file(directory: Path, bootstrap: str, topic: str, catch_all_url: str) -> Path:
    path = directory / "config.yaml"
    retry = {"retry": FAST_RETRY}
    path.write_text(
        yaml.safe_dump(
            {
                "kafka": {"bootstrap_servers": bootstrap, "topic": topic},
                "consumers": {
                    # A plain HTTP receiver that takes what Marquez refused (the fix).
                    "catch-all": {"target": {"kind": "http", "url": catch_all_url, **retry}},
                },
            }
        )
    )
    return path


async def test_dead_letters_are_listed_shown_and_redriven_without_leaving_the_dlq(
    broker, topic_with, tmp_path
):
    bootstrap = broker.bootstrap_servers
    topic = topic_with(3)
    bogus = {**run_event(event_type="OTHER"), "eventTime": "2026-11-23"}  # Marquez: 500 code 400
    null_time = {"eventTime": None, "producer": "x", "run": {"runId": "r"}}  # Marquez: 422
    messages = [
        (KEY, orjson.dumps(run_event(event_type="START"))),
        (KEY, orjson.dumps(bogus)),
        (KEY, b"{not json"),  # poison
        (KEY, orjson.dumps(null_time)),
        (KEY, orjson.dumps(run_event(event_type="COMPLETE"))),
    ]
    async with MarquezDouble() as marquez, TargetDouble() as catch_all:
        config = consumer_config({"kind": "marquez", "url": marquez.url}, topic)
        async with running(bootstrap, config, "to-marquez") as daemon:
            await asyncio.to_thread(produce, bootstrap, topic, messages)
            await wait_for(
                lambda: (
                    metric(daemon, "dead_lettered", why="refused") == 2
                    and metric(daemon, "dead_lettered", why="poison") == 1
                ),
                what="three dead letters",
            )
        dlq_topic = f"{topic}.dlq"
        cli = _config_file(tmp_path, bootstrap, topic, catch_all.url + catch_all.path)

        # list: every dead letter of the consumer, with its reason and event
        code, out, _ = await _dlq(cli, "list", "--consumer", "to-marquez", "--format", "json")
        assert code == 0
        listed = [orjson.loads(line) for line in out.splitlines()]
        assert len(listed) == 3, out
        by_type = {entry["event_type"]: entry for entry in listed}
        assert set(by_type) == {"OTHER", None}
        assert by_type["OTHER"]["http_status"] == "500" and by_type["OTHER"]["key"] == KEY
        assert by_type["OTHER"]["job"] == "team-a/etl.daily"
        assert all(entry["consumer"] == "to-marquez" and entry["time"] for entry in listed)
        poison = [e for e in listed if e["reason"].startswith("poison")]
        refused = [e for e in listed if not e["reason"].startswith("poison")]
        assert len(poison) == 1 and len(refused) == 2
        code, out, _ = await _dlq(cli, "list", "--reason", "POISON")
        assert code == 0 and out.count("\n") == 1 and poison[0]["id"] in out
        code, out, err = await _dlq(cli, "list", "--consumer", "someone-else")
        assert code == 0 and out == ""
        assert f"no selected dead letters in {dlq_topic}" in err  # said, on stderr

        # show: the record whole, the event parsed, the source named
        code, out, _ = await _dlq(cli, "show", by_type["OTHER"]["id"], "--topic", dlq_topic)
        assert code == 0
        shown = orjson.loads(out)
        assert shown["event"] == bogus and shown["reason"] == by_type["OTHER"]["reason"]
        assert shown["source"] == {
            "topic": topic,
            "partition": shown["source"]["partition"],
            "offset": 1,
        }
        assert shown["headers"]["dlq_retriable"] == "false"

        # redrive --dry-run sends nothing; to a consumer's target: the refused two land
        refused_ids = sorted(e["id"] for e in refused)
        code, out, _ = await _dlq(
            cli, "redrive", *refused_ids, "--to-consumer", "catch-all", "--dry-run"
        )
        assert code == 0 and out.count("would redrive") == 2 and catch_all.events == []
        code, out, err = await _dlq(
            cli, "redrive", "--reason", "refused", "--to-consumer", "catch-all"
        )
        assert code == 0, err
        assert sorted(line.split()[1] for line in out.splitlines()) == refused_ids
        assert sorted(catch_all.events, key=str) == sorted([bogus, null_time], key=str)

        # the poison message cannot be re-sent as an event: said, exit 1
        code, out, _ = await _dlq(cli, "redrive", poison[0]["id"], "--to-consumer", "catch-all")
        assert code == 1 and out.startswith(f"failed {poison[0]['id']}: not a JSON object")

        # to another topic, and by default to the topic they came from
        other = f"{topic}.fixed"
        create_topic(bootstrap, other, 1)
        code, out, err = await _dlq(cli, "redrive", by_type["OTHER"]["id"], "--to-topic", other)
        assert code == 0, err
        landed = await asyncio.to_thread(read_all_produced_so_far, bootstrap, other)
        # Keyed as the proxy keys it (its run), not by the key it came with.
        assert [(r.key, orjson.loads(r.value)) for r in landed] == [(event_key(bogus), bogus)]
        # a missing topic: refused with the flag to give, which is then accepted
        missing = f"{topic}.new"
        bogus_id = by_type["OTHER"]["id"]
        code, _, err = await _dlq(cli, "redrive", bogus_id, "--to-topic", missing)
        assert code == 2 and "give --create-topic to create it" in err, err
        code, _, err = await _dlq(cli, "redrive", bogus_id, "--to-topic", missing, "--create-topic")
        assert code == 0, err
        landed = await asyncio.to_thread(read_all_produced_so_far, bootstrap, missing)
        assert [orjson.loads(r.value) for r in landed] == [bogus]
        code, out, err = await _dlq(
            cli, "redrive", "--consumer", "to-marquez", "--reason", "code 400"
        )
        assert code == 0, err
        assert out.splitlines() == [f"redriven {by_type['OTHER']['id']}"]
        source = await asyncio.to_thread(read_all_produced_so_far, bootstrap, topic)
        assert [
            orjson.loads(r.value) for r in source if b'"eventTime":"2026-11-23"' in r.value
        ] == [bogus, bogus]

        # usage errors: exit 2, nothing sent
        for args in (
            ("redrive",),  # no selection
            ("redrive", "--all", "--to-consumer", "no-such-consumer"),
            ("show", "7:99999"),
            ("list", "--topic", f"{topic}.nope"),
        ):
            code, _, err = await _dlq(cli, *args)
            assert code == 2 and err.count("\n") == 1, (args, err)

    # Re-driving never removed anything: the DLQ holds the three, as before.
    kept = await asyncio.to_thread(read_all_produced_so_far, bootstrap, dlq_topic)
    assert sorted(f"{r.partition}:{r.offset}" for r in kept) == sorted(e["id"] for e in listed)


async def test_redrive_to_an_unreachable_consumer_target_stops_after_bounded_attempts(
    broker, topic, tmp_path: Path
):
    """Nothing listens at the consumer's URL. The redrive must end on its own (a real
    process, killed if it has not ended in a minute), say that the target stayed
    unreachable and name the records it did not try (issue 25, item 7)."""
    dlq = f"{topic}.dlq"
    await asyncio.to_thread(create_topic, broker.bootstrap_servers, dlq, 1)
    events = [run_event() for _ in range(3)]
    await asyncio.to_thread(
        produce, broker.bootstrap_servers, dlq, [(KEY, orjson.dumps(e)) for e in events]
    )
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "kafka": {"bootstrap_servers": broker.bootstrap_servers, "topic": topic},
                "consumers": {
                    "down": {
                        "target": {
                            "kind": "http",
                            "url": f"http://127.0.0.1:{free_port()}/lineage",
                            "retry": FAST_RETRY,
                        }
                    }
                },
            }
        )
    )
    command = [sys.executable, "-m", "proxy", "dlq", "redrive", "--all"]
    command += ["--to-consumer", "down", "--max-attempts", "3", "--config", str(path)]
    process = await asyncio.to_thread(
        subprocess.run, command, cwd=REPO, capture_output=True, text=True, timeout=120
    )
    lines = process.stdout.splitlines()
    assert process.returncode != 0, process.stderr
    assert lines[0].startswith("failed 0:0: down unreachable after 3 attempts"), lines
    assert lines[1:] == ["not tried 0:1", "not tried 0:2"]
    assert "stayed unreachable" in process.stderr and "Traceback" not in process.stderr
