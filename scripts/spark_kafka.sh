#!/usr/bin/env bash
# Print the comma-separated jars a PySpark job needs to read and write Kafka topics in batch
# (spark.read.format("kafka"), df.write.format("kafka")), for spark.jars: Spark's Kafka
# connector (org.apache.spark:spark-sql-kafka-0-10_2.13) and the part of its runtime
# closure PySpark does not bring (spark-token-provider-kafka, kafka-clients, commons-pool2).
# Fetched with Maven on first use into a cache outside git; later calls reuse them.
#
#   SPARK_KAFKA_VERSION   the connector's release (default below)
#   LINEAGE_PROXY_CACHE   the cache root (default ~/.cache/lineage-proxy)
#
# The connector should match the installed PySpark's Spark release; PySpark 4.3.0's is not on
# Maven Central (404 on 2026-11-27, the newest there is 4.2.0), so the default is 4.2.0, whose
# batch reads and writes run on Spark 4.3.0 (tests/flink/test_joined_with_spark.py).
# The versions of kafka-clients and commons-pool2 are the connector POM's own.
set -euo pipefail
cd "$(dirname "$0")/.."

version="${SPARK_KAFKA_VERSION:-4.2.0}"
home="${LINEAGE_PROXY_CACHE:-$HOME/.cache/lineage-proxy}/spark-kafka-$version"
# The rest of kafka-clients' closure (lz4, snappy, zstd, slf4j) is in PySpark's own jars;
# Maven's copies of them, other releases, would sit beside those on the classpath.
wanted="spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2"

if [ ! -f "$home/jars/.complete" ]; then
  command -v mvn >/dev/null || { echo "spark_kafka.sh: mvn not found (apt-get install maven)" >&2; exit 2; }
  mkdir -p "$home"
  # Test workers may all ask at once: one fetches, the others wait for it.
  exec 9>"$home/.lock"
  flock 9
  if [ ! -f "$home/jars/.complete" ]; then
    cat >"$home/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.lineage-proxy</groupId>
  <artifactId>spark-kafka-fetch</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_2.13</artifactId>
      <version>$version</version>
    </dependency>
  </dependencies>
</project>
EOF
    rm -rf "$home/jars"
    if ! mvn -q -B -f "$home/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
      -DincludeArtifactIds="$wanted" -DoutputDirectory="$home/jars" >"$home/fetch.log" 2>&1; then
      echo "spark_kafka.sh: Maven could not fetch spark-sql-kafka-0-10_2.13:$version (see $home/fetch.log)" >&2
      tail -n 20 "$home/fetch.log" >&2
      exit 1
    fi
    [ "$(ls "$home"/jars/*.jar | wc -l)" -eq 4 ] || { echo "spark_kafka.sh: expected 4 jars in $home/jars" >&2; exit 1; }
    touch "$home/jars/.complete"
  fi
fi
ls "$home"/jars/*.jar | paste -sd, -
