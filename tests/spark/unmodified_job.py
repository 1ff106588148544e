"""A PySpark job that knows nothing of lineage: no spark_emitter import, no listener conf.

``python tests/spark/unmodified_job.py OUTDIR`` writes two Parquet datasets under OUTDIR,
the second read from the first. ``test_zero_code.py`` runs it through
``python -m spark_emitter.instrument`` and expects lineage for both writes.
"""

import sys

from pyspark.sql import SparkSession

out = sys.argv[1]
spark = (
    SparkSession.builder.master("local[2]")
    .appName("unmodified_job")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)
spark.range(5).write.mode("overwrite").parquet(f"{out}/numbers")
doubled = spark.read.parquet(f"{out}/numbers").selectExpr("id * 2 AS doubled")
doubled.write.mode("overwrite").parquet(f"{out}/doubled")
spark.stop()
