"""A PySpark batch job between two Kafka topics, with both OpenLineage integrations on it:
the official Spark jar (``spark.extraListeners``, its http transport) and the project's
emitter (``enable_lineage``), so one JVM start serves both. Run as a process of its own
(``python -m tests.flink.spark_kafka_job SPEC_JSON`` from the repository root), never
imported by the suite: its ``spark.jars`` (the Kafka connector, the official jar) are fixed
when the JVM starts.

The job is the code SPEC holds (docs/clients/flink.md's ``kafka_copy.py``, run with
``spark`` its session): it reads every record of one topic (``spark.read.format("kafka")``)
and writes their values to another (``df.write.format("kafka")``).
Prints one JSON line: the emitter's delivery counters.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pyspark.sql import SparkSession

from spark_emitter import enable_lineage


def main(spec: dict[str, Any]) -> dict[str, Any]:
    builder = (
        SparkSession.builder.master("local[1]")
        .appName(spec["app_name"])
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.warehouse.dir", f"file:{spec['workdir']}/warehouse")
        .config("spark.openlineage.emitter.buffer.directory", f"{spec['workdir']}/buffer")
    )
    for key, value in spec["conf"].items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    ours = spec["emitter"]
    emitter = enable_lineage(
        spark, url=ours["url"], api_key=ours["api_key"], namespace=ours["namespace"], environ={}
    )
    assert emitter is not None
    # The job itself: docs/clients/flink.md's kafka_copy.py, with the test's servers and topics.
    exec(spec["code"], {"spark": spark})
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(60_000)
    spark.stop()
    assert emitter.close(), "the emitter's last events were not sent"
    stats = emitter.stats
    return {"ours": {"sent": stats.sent, "failed": stats.failed}}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
