#!/usr/bin/env bash
# Creates .venv at the repository root and installs what the pipeline needs (idempotent).
#   scripts/setup.sh            runtime
#   scripts/setup.sh --dev      runtime + test tools
set -euo pipefail
cd "$(dirname "$0")/.."
req=requirements.txt
[ "${1:-}" = "--dev" ] && req=requirements-dev.txt

# Spark needs Java; the JVM-side decoders (jobs/jvm) are compiled with the JDK's javac
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
stamp=".venv/.installed-$(cat "$req" requirements.txt | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r "$req"
  touch "$stamp"
fi
scripts/build_jvm.sh
