#!/usr/bin/env bash
# Apache Kafka (KRaft) on loopback for development, tests and benchmarks.
#
#   scripts/kafka.sh fetch              fetch kafka_2.13 and its dependencies with Maven, once
#   scripts/kafka.sh classpath          fetch if needed, print the java classpath (the tests'
#                                       tests/support/kafka_cluster.py calls this: one place)
#   scripts/kafka.sh start [N] [DIR]    start N (1 or 3, default 3) brokers with their data in
#                                       DIR (default var/kafka); prints bootstrap servers
#   scripts/kafka.sh stop [DIR]         stop the brokers started in DIR (their data stays)
#
# The jars go to ${LINEAGE_PROXY_CACHE:-~/.cache/lineage-proxy}/kafka-<version>/libs, outside
# git; a later run reuses them (Maven's own ~/.m2 holds the downloads too). KAFKA_VERSION picks
# another 4.x release.
set -euo pipefail
cd "$(dirname "$0")/.."

version="${KAFKA_VERSION:-4.1.1}"
home="${LINEAGE_PROXY_CACHE:-$HOME/.cache/lineage-proxy}/kafka-$version"

fetch() {
  [ -f "$home/libs/.complete" ] && return 0
  command -v mvn >/dev/null || { echo "kafka.sh: mvn not found (apt-get install maven)" >&2; exit 2; }
  mkdir -p "$home"
  # Test workers may all ask at once: one fetches, the others wait for it.
  exec 9>"$home/.lock"
  flock 9
  [ -f "$home/libs/.complete" ] && return 0
  # A pom whose only job is to name the broker; copy-dependencies resolves its runtime closure.
  # log4j-slf4j-impl routes the broker's slf4j logging to log4j2 (server.log per node).
  cat >"$home/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.lineage-proxy</groupId>
  <artifactId>kafka-fetch</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>$version</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>2.24.3</version>
    </dependency>
  </dependencies>
</project>
EOF
  rm -rf "$home/libs"
  if ! mvn -q -B -f "$home/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$home/libs" >"$home/fetch.log" 2>&1; then
    echo "kafka.sh: Maven could not fetch org.apache.kafka:kafka_2.13:$version (see $home/fetch.log)" >&2
    tail -n 20 "$home/fetch.log" >&2
    exit 1
  fi
  touch "$home/libs/.complete"
}

cluster() {
  local python=.venv/bin/python
  [ -x "$python" ] || python=python3
  exec "$python" -m tests.support.kafka_cluster "$@"
}

case "${1:-}" in
  fetch) fetch ;;
  classpath) fetch && echo "$home/libs/*" ;;
  start) cluster start --brokers "${2:-3}" --directory "${3:-var/kafka}" ;;
  stop) cluster stop --directory "${2:-var/kafka}" ;;
  *)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
