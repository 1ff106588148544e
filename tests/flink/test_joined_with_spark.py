"""A Spark job and the Flink job meet at their Kafka topics in a real Marquez's lineage graph.

The Flink job's one run (tests/flink/conftest.py) streamed topic IN → UPPER → topic OUT
through the proxy. Then a PySpark batch job (docs/clients/flink.md's ``kafka_copy.py``, run
by ``spark_kafka_job.py`` in one JVM) copies OUT back into IN, with both Spark integrations
on it: the official jar and the project's emitter, each posting to a proxy with the same
rules as the Flink job's. Each side gives the cluster its own way: Flink reads IN by the
bootstrap list and writes OUT by hostname, the last broker first; Spark reads OUT by
address, the second broker first, and writes IN by hostname. Every integration names a
topic by the first server it was given, so without the rules neither topic would be one
dataset for both sides. The rules' alignment (``kafka-streaming.yaml``, as
docs/clients/flink.md shows it) names them all as one namespace, so the proxy's consumer
delivers into Marquez a graph where Spark → IN → Flink → OUT → Spark is connected, read
from Marquez's lineage endpoint.

One Marquez server (and its PostgreSQL) for this module; one Spark JVM; the Flink run is
the directory's. One test on purpose: about 20 s on 2 idle cores, up to 75 s on 2 shared
ones (over the suite's 30 s for a test), mostly the Spark JVM's start and job, which any
split would repeat.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import requests

from proxy.server.serve import listener_tls, serving
from proxy.web.app import create_app
from tests.flink.conftest import LINES, Streaming
from tests.spark.test_official_jar import LISTENER, official_jar
from tests.support.consumers import consumer_config, metric, running
from tests.support.kafka_cluster import KafkaCluster
from tests.support.kafka_reader import read_all_produced_so_far
from tests.support.marquez import MarquezServer, MarquezUnavailable, marquez_servers
from tests.support.paths import REPO
from tests.support.proxies import proxy_config
from tests.support.tiers import starts
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.marquez, pytest.mark.timeout(1200)]

TOKEN = "spark-kafka-token"
APP = "kafka_copy"
OURS, THEIRS = "spark-emitter", "spark-jar"  # the two integrations' job namespaces
# Both name a batch write to Kafka after the command alone, no topic appended.
SPARK_JOB = f"{APP}.execute_save_into_data_source_command"


PAGE = REPO / "docs" / "clients" / "flink.md"


def spark_job(replacing: dict[str, str]) -> str:
    """The page's ``kafka_copy.py``, each of its quoted values replaced by the test's."""
    [code] = re.findall(r'```python title="kafka_copy.py"\n(.*?)```', PAGE.read_text(), re.S)
    for documented, value in replacing.items():
        assert code.count(f'"{documented}"') == 1, documented
        code = code.replace(f'"{documented}"', json.dumps(value))
    return str(code)


@pytest.fixture(scope="module")
@starts("Marquez (a JVM) and PostgreSQL")
def marquez() -> Iterator[MarquezServer]:
    """One real Marquez server of this module's own (the flink xdist group runs apart from
    the marquez one)."""
    try:
        with marquez_servers("joined") as servers:
            yield servers["joined"]
    except MarquezUnavailable as error:
        pytest.fail(f"real Marquez cannot be had here: {error}")


def _kafka_jars() -> str:
    """Spark's Kafka connector and its dependencies: the one place that fetches them."""
    done = subprocess.run(
        [str(REPO / "scripts" / "spark_kafka.sh")], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


async def _run_spark(spec: dict[str, Any]) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.flink.spark_kafka_job",
        json.dumps(spec),
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=900)
    assert process.returncode == 0, stderr.decode()[-3000:]
    return dict(json.loads(stdout.decode().strip().splitlines()[-1]))


def _edges(graph: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(origin, destination) of every edge of a Marquez lineage graph."""
    return {
        (edge["origin"], edge["destination"])
        for node in graph
        for edge in node["inEdges"] + node["outEdges"]
    }


async def test_spark_and_flink_jobs_join_at_their_kafka_topics_in_marquez(
    streaming: Streaming, broker: KafkaCluster, marquez: MarquezServer, tmp_path: Path
) -> None:
    bootstrap = broker.bootstrap_servers
    ports = [server.rsplit(":", 1)[1] for server in bootstrap.split(",")]
    # Never as the Flink job gave them: it wrote OUT by hostname, the last broker first (read
    # here by address, the second broker first); it read IN by address (written by hostname).
    read_by = ",".join(f"127.0.0.1:{port}" for port in ports[1:] + ports[:1])
    write_by = ",".join(f"localhost:{port}" for port in ports)
    config = proxy_config(
        bootstrap,
        streaming.lineage_topic,
        auth={"enabled": True, "tokens": [{"name": "spark", "token": TOKEN}]},
        server={"host": "127.0.0.1", "port": 0},
        routing={"rules": streaming.rules, "archive_root": tmp_path / "archive"},
    )
    jar_copy = tmp_path / "jar-sent.jsonl"  # what the jar sent, before the proxy's rules
    jars = f"{await asyncio.to_thread(_kafka_jars)},{await asyncio.to_thread(official_jar)}"
    async with serving(create_app(config), listener_tls(config)) as port:
        url = f"http://127.0.0.1:{port}"
        transport = "spark.openlineage.transport."
        spec = {
            "app_name": APP,
            "workdir": str(tmp_path),
            "conf": {
                "spark.jars": jars,
                "spark.extraListeners": LISTENER,
                "spark.openlineage.namespace": THEIRS,
                transport + "type": "composite",
                transport + "transports.proxy.type": "http",
                transport + "transports.proxy.url": url,
                transport + "transports.proxy.auth.type": "api_key",
                transport + "transports.proxy.auth.apiKey": TOKEN,
                transport + "transports.copy.type": "file",
                transport + "transports.copy.location": str(jar_copy),
            },
            "emitter": {"url": url, "api_key": TOKEN, "namespace": OURS},
            "code": spark_job(
                {
                    "10.0.0.12:9092,10.0.0.11:9092": read_by,
                    "clicks.upper": streaming.sink_topic,
                    "broker1.internal:9092": write_by,
                    "clicks": streaming.source_topic,
                }
            ),
        }
        summary = await _run_spark(spec)
    assert summary["ours"]["failed"] == 0 and summary["ours"]["sent"] > 0, summary

    # The Spark job really copied the Flink job's output into its input topic.
    source = await asyncio.to_thread(read_all_produced_so_far, bootstrap, streaming.source_topic)
    assert [r.value for r in source] == [line.encode() for line in LINES] + [
        line.upper().encode() for line in LINES
    ]
    # The jar named each topic by the first server it was given; the proxy's rule renamed.
    jar_sent = [json.loads(line) for line in jar_copy.read_text().splitlines()]
    [jar_write] = [e for e in jar_sent if e["eventType"] == "COMPLETE" and e.get("outputs")]
    assert [(d["namespace"], d["name"]) for d in jar_write["inputs"] + jar_write["outputs"]] == [
        (f"kafka://127.0.0.1:{ports[1]}", streaming.sink_topic),
        (f"kafka://localhost:{ports[0]}", streaming.source_topic),
    ]

    # Everything in the lineage topic, Flink's events and Spark's, into Marquez.
    records = await asyncio.to_thread(read_all_produced_so_far, bootstrap, streaming.lineage_topic)
    events = [orjson.loads(r.value) for r in records]
    target = {"kind": "marquez", "url": marquez.url}
    async with running(bootstrap, consumer_config(target, streaming.lineage_topic)) as daemon:
        await wait_for(
            lambda: metric(daemon, "delivered") >= len(events),
            within=120,
            what=f"the {len(events)} events of the lineage topic delivered to Marquez",
        )
    assert metric(daemon, "delivered") == len(events)

    [flink_job] = {
        (e["job"]["namespace"], e["job"]["name"]) for e in events if "flink" in e["producer"]
    }
    topic_in = f"dataset:{streaming.canonical}:{streaming.source_topic}"
    topic_out = f"dataset:{streaming.canonical}:{streaming.sink_topic}"
    flink = f"job:{flink_job[0]}:{flink_job[1]}"
    spark = [f"job:{namespace}:{SPARK_JOB}" for namespace in (OURS, THEIRS)]
    response = await asyncio.to_thread(
        requests.get,
        f"{marquez.url}/api/v1/lineage",
        params={"nodeId": topic_in, "depth": "4"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    graph = response.json()["graph"]
    # Spark → IN → Flink → OUT → Spark, by both Spark integrations, and nothing else: a
    # topic named two ways would be a node apart, with its own edges.
    assert _edges(graph) == {
        *((job, topic_in) for job in spark),
        (topic_in, flink),
        (flink, topic_out),
        *((topic_out, job) for job in spark),
    }
    assert sorted(node["id"] for node in graph) == sorted([topic_in, topic_out, flink, *spark])
