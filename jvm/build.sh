#!/usr/bin/env bash
# Compiles the pipeline's JVM-side decoders (jvm/src) against the venv's Spark into
# jobs/spark/jars/cdc-jvm.jar (idempotent: rebuilt when a source or Spark's version changes).
# Needs a JDK's javac and jar; without the jar, Debezium and DTS Avro cannot be decoded (docs/formats/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
jars="$(.venv/bin/python -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
out=jobs/spark/jars
stamp="$out/.stamp-$( (cat jvm/src/cdc/*.java; ls "$jars") | sha256sum | cut -c1-16)"
[ -f "$stamp" ] && [ -f "$out/cdc-jvm.jar" ] && exit 0
if ! command -v javac >/dev/null 2>&1 || ! command -v jar >/dev/null 2>&1; then
  echo "setup: no JDK (javac): the JVM-side decoders are not built; apt-get install openjdk-17-jdk-headless" >&2
  exit 0
fi
rm -rf "$out" && mkdir -p "$out/classes"
javac -nowarn --release 17 -encoding UTF-8 -cp "$jars/*" -d "$out/classes" jvm/src/cdc/*.java
jar cf "$out/cdc-jvm.jar" -C "$out/classes" .
rm -rf "$out/classes"
touch "$stamp"
