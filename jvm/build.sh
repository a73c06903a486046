#!/usr/bin/env bash
# The pipeline's JVM-side decoders, offline: compiles jvm/src against the venv's Spark jars into
# jobs/spark/jars/cdc-jvm.jar (idempotent: rebuilt when a source or Spark's version changes).
#   jvm/build.sh        build the jar; without a JDK, say so and leave it unbuilt (setup goes on, but no run can
#                       decode then: docs/formats/README.md)
#   jvm/build.sh test   build the jar, then compile jvm/test against it and run its tests (a JDK is needed)
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-build}"
case "$mode" in build | test) ;; *) echo "usage: jvm/build.sh [test]" >&2; exit 2 ;; esac
jars="$(.venv/bin/python -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
out=jobs/spark/jars
if ! command -v javac >/dev/null 2>&1 || ! command -v jar >/dev/null 2>&1; then
  echo "setup: no JDK (javac): the JVM-side decoders are not built; apt-get install openjdk-17-jdk-headless" >&2
  [ "$mode" = build ] && exit 0 || exit 1
fi
stamp="$out/.stamp-$( (cat jvm/src/cdc/*.java; ls "$jars") | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ] || [ ! -f "$out/cdc-jvm.jar" ]; then
  rm -rf "$out" && mkdir -p "$out/classes"
  javac -nowarn --release 17 -encoding UTF-8 -cp "$jars/*" -d "$out/classes" jvm/src/cdc/*.java
  jar cf "$out/cdc-jvm.jar" -C "$out/classes" .
  rm -rf "$out/classes"
  touch "$stamp"
fi
[ "$mode" = build ] && exit 0
tests="$(mktemp -d)"
trap 'rm -rf "$tests"' EXIT
javac -nowarn --release 17 -encoding UTF-8 -cp "$out/cdc-jvm.jar:$jars/*" -d "$tests" jvm/test/cdc/*.java
java -cp "$tests:$out/cdc-jvm.jar:$jars/*" cdc.RunTests "$PWD"
