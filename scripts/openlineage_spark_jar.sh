#!/usr/bin/env bash
# Print the path of the official OpenLineage Spark integration's jar
# (io.openlineage:openlineage-spark_2.13), fetching it with Maven on first use into a cache
# outside git; later calls reuse it without touching the network.
#
#   OPENLINEAGE_SPARK_VERSION  the release (default below)
#   LINEAGE_PROXY_CACHE        the cache root (default ~/.cache/lineage-proxy)
#
# The default is the release nearest the openlineage-python the project pins (1.54): 1.54.0
# of the Spark jar is not on Maven Central (404 on 2026-11-26; the newest there is 1.53.0).
# The jar is self-contained (its POM declares no dependencies), so it alone goes on
# spark.jars; Spark (PySpark 4.x, Scala 2.13) brings the rest.
set -euo pipefail
version="${OPENLINEAGE_SPARK_VERSION:-1.53.0}"
cache="${LINEAGE_PROXY_CACHE:-$HOME/.cache/lineage-proxy}/openlineage-spark-${version}"
jar="$cache/openlineage-spark_2.13-${version}.jar"
if [ ! -s "$jar" ]; then
  command -v mvn >/dev/null || { echo "openlineage_spark_jar.sh: mvn not found (apt-get install maven)" >&2; exit 1; }
  mkdir -p "$cache"
  # Into a scratch name first, so an interrupted download is never taken for the jar.
  scratch="$(mktemp -d "$cache/.fetch.XXXXXX")"
  trap 'rm -rf "$scratch"' EXIT
  if ! mvn -q -B dependency:copy \
      "-Dartifact=io.openlineage:openlineage-spark_2.13:${version}" \
      "-DoutputDirectory=$scratch" >"$scratch/mvn.log" 2>&1; then
    echo "openlineage_spark_jar.sh: Maven could not fetch io.openlineage:openlineage-spark_2.13:${version}:" >&2
    grep -E 'ERROR' "$scratch/mvn.log" | head -3 >&2
    exit 1
  fi
  mv "$scratch/openlineage-spark_2.13-${version}.jar" "$jar"
fi
echo "$jar"
