#!/usr/bin/env bash
# A real S3-compatible server (S3Proxy over a local directory) and Spark's s3a connector,
# fetched from Maven Central into a cache outside git, for development and tests.
#
#   scripts/s3.sh fetch             fetch org.gaul:s3proxy and its dependencies, once
#   scripts/s3.sh classpath         fetch if needed, print S3Proxy's java classpath (the
#                                   tests' tests/support/s3_server.py calls this: one place)
#   scripts/s3.sh hadoop-aws-jars   fetch if needed, print the comma-separated jars Spark
#                                   needs for s3a:// (hadoop-aws + the AWS SDK v2 bundle…),
#                                   for spark.jars
#
# The jars go to ${LINEAGE_PROXY_CACHE:-~/.cache/lineage-proxy}/s3proxy-<version>/libs and
# .../hadoop-aws-<version>/libs; a later run reuses them. S3PROXY_VERSION and
# HADOOP_AWS_VERSION pick other releases (hadoop-aws must match the Hadoop client jars of
# the installed PySpark: 3.5.0 for PySpark 4.3).
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${LINEAGE_PROXY_CACHE:-$HOME/.cache/lineage-proxy}"

# fetch NAME GROUP ARTIFACT VERSION: the artifact's runtime closure into $cache/NAME/libs.
fetch() {
  local home="$cache/$1" group="$2" artifact="$3" version="$4"
  [ -f "$home/libs/.complete" ] && return 0
  command -v mvn >/dev/null || { echo "s3.sh: mvn not found (apt-get install maven)" >&2; exit 2; }
  mkdir -p "$home"
  # Test workers may all ask at once: one fetches, the others wait for it.
  exec 9>"$home/.lock"
  flock 9
  [ -f "$home/libs/.complete" ] && return 0
  cat >"$home/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.lineage-proxy</groupId>
  <artifactId>$artifact-fetch</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>$group</groupId><artifactId>$artifact</artifactId><version>$version</version>
    </dependency>
  </dependencies>
</project>
POM
  rm -rf "$home/libs"
  if ! mvn -q -B -f "$home/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$home/libs" >"$home/fetch.log" 2>&1; then
    echo "s3.sh: Maven could not fetch $group:$artifact:$version (see $home/fetch.log)" >&2
    tail -n 20 "$home/fetch.log" >&2
    exit 1
  fi
  touch "$home/libs/.complete"
}

s3proxy_version="${S3PROXY_VERSION:-2.6.0}"
hadoop_aws_version="${HADOOP_AWS_VERSION:-3.5.0}"

case "${1:-}" in
  fetch)
    fetch "s3proxy-$s3proxy_version" org.gaul s3proxy "$s3proxy_version"
    fetch "hadoop-aws-$hadoop_aws_version" org.apache.hadoop hadoop-aws "$hadoop_aws_version"
    ;;
  classpath)
    fetch "s3proxy-$s3proxy_version" org.gaul s3proxy "$s3proxy_version"
    echo "$cache/s3proxy-$s3proxy_version/libs/*"
    ;;
  hadoop-aws-jars)
    fetch "hadoop-aws-$hadoop_aws_version" org.apache.hadoop hadoop-aws "$hadoop_aws_version"
    # hadoop-aws's runtime closure is the connector, the AWS SDK bundle, the analytics
    # accelerator and wildfly-openssl: PySpark brings Hadoop's client jars itself.
    ls "$cache/hadoop-aws-$hadoop_aws_version/libs/"*.jar | paste -sd, -
    ;;
  *)
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
