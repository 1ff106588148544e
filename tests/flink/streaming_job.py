"""A PyFlink streaming job on a local mini-cluster, run by the Flink venv's python
(``scripts/flink.sh python``), never imported by the suite: Kafka topic → UPPER → Kafka
topic in Flink SQL, with the OpenLineage settings it is handed (docs/clients/flink.md's).

The transform is SQL so the job runs in the JVM alone (a Python UDF would start a Python
worker too, on a 2-core machine, to prove nothing more about lineage). The job is driven
on stdin, so the test decides when each phase ends from what it saw arrive, not from a
clock: ``stop`` cancels the job (the listener's ABORT), ``exit`` ends the process once the
test has seen that ABORT (the JobManager's listener sends it from a thread of its own,
which the end of the process would cut short).

Usage: ``python streaming_job.py SPEC_JSON``; prints one JSON line per phase.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.table import StreamTableEnvironment


def _table(name: str, topic: dict[str, str], reading: bool) -> str:
    """A raw-format Kafka table: one STRING column, the record's value as it is."""
    options = {
        "connector": "kafka",
        "topic": topic["topic"],
        "properties.bootstrap.servers": topic["bootstrap"],
        "format": "raw",
    }
    if reading:
        options.update({"properties.group.id": name, "scan.startup.mode": "earliest-offset"})
    settings = ",\n".join(f"'{key}' = '{value}'" for key, value in options.items())
    return f"CREATE TABLE {name} (line STRING) WITH (\n{settings})"


def _say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def main(spec: dict[str, Any]) -> None:
    config = Configuration()
    for key, value in spec["settings"].items():
        config.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(1)
    tables = StreamTableEnvironment.create(env)
    tables.execute_sql(_table("source_topic", spec["source"], reading=True))
    tables.execute_sql(_table("sink_topic", spec["sink"], reading=False))
    result = tables.execute_sql("INSERT INTO sink_topic SELECT UPPER(line) FROM source_topic")
    client = result.get_job_client()
    assert client is not None
    _say(phase="running", job_id=str(client.get_job_id()))
    for line in sys.stdin:
        if line.strip() == "stop":
            client.cancel().result()
            _say(phase="cancelled", status=str(client.get_job_status().result()))
        elif line.strip() == "exit":
            break


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
