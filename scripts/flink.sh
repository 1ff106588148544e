#!/usr/bin/env bash
# Apache Flink for the tests and for trying docs/clients/flink.md by hand: PyFlink in a venv
# of its own and the two jars a Flink job needs to send lineage of its Kafka topics, the
# OpenLineage Flink integration and Flink's Kafka connector, all in a cache outside git.
#
#   scripts/flink.sh python    install if needed; print the venv's python (PyFlink in it)
#   scripts/flink.sh jars      fetch if needed; print the jars' paths, one a line
#
#   FLINK_VERSION         PyFlink's release (default below)
#   LINEAGE_PROXY_CACHE   the cache root (default ~/.cache/lineage-proxy)
#
# Why these versions: openlineage-flink 1.53.0 (the newest release on Maven Central, like
# the Spark jar's) holds both listeners, Flink 1.x's JobListener (tested by OpenLineage on
# 1.15 to 1.19) and Flink 2's native JobStatusChangedListener (built against 2.0.0, whose
# Kafka connector 4.0.x is the first to report its topics as lineage). Flink 2 needs no change
# to the job, only configuration, so that is what the docs show and the tests run. PyFlink
# (apache-flink, with its ~800 MB of jars) would not fit the project's venv; it gets its own.
set -euo pipefail
cd "$(dirname "$0")/.."

version="${FLINK_VERSION:-2.0.2}"
openlineage_version=1.53.0
kafka_connector_version=4.0.1-2.0
home="${LINEAGE_PROXY_CACHE:-$HOME/.cache/lineage-proxy}/flink-$version"

locked() {
  mkdir -p "$home"
  # Test workers may all ask at once: one installs, the others wait for it.
  exec 9>"$home/.lock"
  flock 9
}

install_venv() {
  local want="apache-flink==$version"
  [ "$(cat "$home/venv/.installed" 2>/dev/null)" = "$want" ] && return 0
  locked
  [ "$(cat "$home/venv/.installed" 2>/dev/null)" = "$want" ] && return 0
  local python=.venv/bin/python
  [ -x "$python" ] || python=python3
  rm -rf "$home/venv"
  "$python" -m venv "$home/venv"
  if ! "$home/venv/bin/pip" install -q --disable-pip-version-check "$want" >"$home/pip.log" 2>&1; then
    echo "flink.sh: pip could not install $want (see $home/pip.log)" >&2
    tail -n 20 "$home/pip.log" >&2
    exit 1
  fi
  echo "$want" >"$home/venv/.installed"
}

fetch_jars() {
  [ -f "$home/jars/.complete" ] && return 0
  locked
  [ -f "$home/jars/.complete" ] && return 0
  command -v mvn >/dev/null || { echo "flink.sh: mvn not found (apt-get install maven)" >&2; exit 2; }
  # Both jars are self-contained (shaded; their POMs declare no runtime dependencies).
  cat >"$home/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.lineage-proxy</groupId>
  <artifactId>flink-fetch</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>io.openlineage</groupId><artifactId>openlineage-flink</artifactId>
      <version>$openlineage_version</version>
    </dependency>
    <dependency>
      <groupId>org.apache.flink</groupId><artifactId>flink-sql-connector-kafka</artifactId>
      <version>$kafka_connector_version</version>
    </dependency>
  </dependencies>
</project>
EOF
  rm -rf "$home/jars"
  if ! mvn -q -B -f "$home/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$home/jars" >"$home/fetch.log" 2>&1; then
    echo "flink.sh: Maven could not fetch the Flink jars (see $home/fetch.log)" >&2
    tail -n 20 "$home/fetch.log" >&2
    exit 1
  fi
  touch "$home/jars/.complete"
}

case "${1:-}" in
  python) install_venv && echo "$home/venv/bin/python" ;;
  jars) fetch_jars && ls "$home"/jars/*.jar ;;
  *)
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
