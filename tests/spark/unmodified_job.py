"""A PySpark job that knows nothing of lineage: no spark_emitter import, no listener conf.

``spark-submit tests/spark/unmodified_job.py OUTDIR`` writes two Parquet datasets under
OUTDIR, the second read from the first, and prints where PySpark was imported from (under
``spark-submit``, ``pyspark.zip``). ``test_zero_code.py`` runs it with lineage turned on
from outside — ``python -m spark_emitter.instrument``, a cluster's ``spark-env.sh`` — and
expects lineage for both writes.
"""

import sys

import pyspark
from pyspark.sql import SparkSession

print("pyspark imported from", pyspark.__file__)

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
