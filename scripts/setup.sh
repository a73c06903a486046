#!/usr/bin/env bash
# Creates .venv at the repository root and installs what the pipeline needs (idempotent): the package's
# dependencies and extras from the requirements files pyproject.toml reads them from, not the package
# itself (the checkout's jobs/ is what runs here; the wheel is for installs elsewhere: make wheel).
#   scripts/setup.sh            runtime + [airflow] + [demo]
#   scripts/setup.sh --dev      the same + [dev] (test and lint tools)
# AIRFLOW_CONSTRAINTS (a path or URL): Airflow's constraints file for the pinned Airflow and this Python,
# under which apache-airflow is installed first (docs/operations/setup.md).
set -euo pipefail
cd "$(dirname "$0")/.."
reqs=(requirements.txt requirements-airflow.txt requirements-demo.txt)
[ "${1:-}" = "--dev" ] && reqs+=(requirements-dev.txt)

# Spark needs Java; the JVM-side decoders (jvm/) are compiled with the JDK's javac
if ! command -v java >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing a Java 17 JDK for Spark and the JVM-side decoders" >&2
    apt-get update -qq && apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless >/dev/null
  elif ! command -v java >/dev/null 2>&1; then
    echo "setup: Java 17 is required (apt-get install openjdk-17-jdk-headless)" >&2; exit 1
  fi
fi
# the tests' real servers and browser: PostgreSQL and MariaDB as reconciliation sources, Chromium for
# the report pages (tests/support/databases.py, tests/integration/test_report_page.py)
if [ "${1:-}" = "--dev" ]; then
  missing=()
  ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
  command -v mariadbd >/dev/null 2>&1 || missing+=(mariadb-server)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
      echo "setup: installing ${missing[*]} for the tests" >&2
      apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
      echo "setup: the tests need ${missing[*]} (apt-get install ${missing[*]})" >&2; exit 1
    fi
  fi
fi
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=".venv/.installed-$( (cat "${reqs[@]}"; echo "${AIRFLOW_CONSTRAINTS:-}") | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # Airflow's reproducible step, as its docs give it: apache-airflow alone under its constraints; then our
  # pins without them (they may move a package the constraints pin; Airflow stays at its pin)
  if [ -n "${AIRFLOW_CONSTRAINTS:-}" ]; then
    .venv/bin/python -m pip install -q "$(grep -E '^apache-airflow==' requirements-airflow.txt)" \
      --constraint "$AIRFLOW_CONSTRAINTS"
  fi
  .venv/bin/python -m pip install -q "${reqs[@]/#/--requirement=}"
  touch "$stamp"
fi
# the tests' Spark on s3a:// (tests/integration/test_s3_lake.py): hadoop-aws and the AWS SDK bundle it
# was built with, into .venv/s3a-jars. No Maven Central here: both jars are in the sdist of
# sagemaker-pyspark on PyPI, which is downloaded (pinned, its sha256 checked) and read: never installed
# (it pins an old pyspark) nor built (pip download would run its setup). hadoop-aws 3.3.1 does not match
# pyspark's Hadoop: fine for tests (jobs/spark/session.py s3a_conf), production gives a pipeline the
# hadoop-aws of Spark's own Hadoop in spark.packages (docs/operations/spark-and-storage.md, "S3 lakes").
if [ "${1:-}" = "--dev" ]; then
  s3a_version=1.4.5
  s3a_sha256=05ca2d5081d7138ce29a8fb0a9cba077f28c825288ed07aed46a82e63c0bf1fb
  s3a_jars=(hadoop-aws-3.3.1.jar aws-java-sdk-bundle-1.11.901.jar)
  s3a_dir=.venv/s3a-jars
  s3a_stamp="$s3a_dir/.stamp-${s3a_sha256:0:16}"
  if [ ! -f "$s3a_stamp" ] || [ ! -f "$s3a_dir/${s3a_jars[0]}" ] || [ ! -f "$s3a_dir/${s3a_jars[1]}" ]; then
    echo "setup: extracting ${s3a_jars[*]} from sagemaker-pyspark $s3a_version's sdist into $s3a_dir" >&2
    s3a_tmp="$(mktemp -d)"
    trap 'rm -rf "$s3a_tmp"' EXIT
    s3a_sdist="$s3a_tmp/sagemaker_pyspark-$s3a_version.tar.gz"
    # the sdist's address from PyPI's JSON API, then the file, checked before it is opened
    .venv/bin/python - "$s3a_version" "$s3a_sdist" <<'PY'
import json, shutil, sys, urllib.request
version, target = sys.argv[1], sys.argv[2]
with urllib.request.urlopen("https://pypi.org/pypi/sagemaker-pyspark/json", timeout=60) as resp:
    (url,) = [f["url"] for f in json.load(resp)["releases"][version] if f["packagetype"] == "sdist"]
with urllib.request.urlopen(url, timeout=600) as resp, open(target, "wb") as out:
    shutil.copyfileobj(resp, out, 1 << 20)
PY
    echo "$s3a_sha256  $s3a_sdist" | sha256sum -c --quiet -
    rm -rf "$s3a_dir" && mkdir -p "$s3a_dir"
    tar -xzf "$s3a_sdist" -C "$s3a_dir" --strip-components=3 \
      "${s3a_jars[@]/#/sagemaker_pyspark-$s3a_version/deps/jars/}"
    touch "$s3a_stamp"
  fi
fi
jvm/build.sh
