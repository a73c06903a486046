"""An operational failure in a whole run ends the command with one line that names what failed and what
to check, exit code 1, no traceback (``--debug`` adds it) and no secret: an unreachable source database
(a run in this process) and an unreachable catalog (one only a process of its own shows). The masking,
the hints and the refused arguments: tests/unit/test_errors.py."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.operational import DOWN_DB, SECRET
from tests.support.paths import REPO
from tests.support.pipeline_runs import jobs_run


def test_an_unreachable_catalog_is_one_line_exit_1(small_raw, tmp_path):
    # pyiceberg reads its catalogs' settings from the environment once, at import: a process of its own
    env = {**os.environ, "CDC_ICEBERG_CATALOG": "down", "PYICEBERG_CATALOG__DOWN__TYPE": "sql",
           "PYICEBERG_CATALOG__DOWN__URI": DOWN_DB, "CDC_JIT": "c1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "jobs", "run", "--format", "debezium", "--raw", str(small_raw),
                           "--lake", str(tmp_path / "lake"), "--pipeline", "p", "--run-id", "r1"],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and SECRET not in done.stderr + done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert "failed in fold_publish" in last and "Iceberg catalog named by CDC_ICEBERG_CATALOG" in last


def test_an_unreachable_source_database_is_one_line_exit_1_and_debug_shows_the_traceback(small_raw, tmp_path,
                                                                                        capsys):
    assert jobs_run("debezium", small_raw, tmp_path / "lake", "p", "r1", "--source-counts", DOWN_DB) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and SECRET not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: run failed in reconcile:") and "source database of --source-counts" in last
    # progress: each stage that ended says what it did; the failed one only that it started
    progress = [line.split(" ", 1)[1] for line in err.strip().splitlines()[:-1]]
    assert [p.split(":")[0].split(" ")[0] for p in progress] == [
        "decode", "decode", "fold_publish", "fold_publish", "validate", "validate", "reconcile"]
    assert " messages: " in progress[1] and " decoded, " in progress[1] and progress[3].split(": ")[1][0].isdigit()
    assert progress[3].startswith("fold_publish: 1 table committed, ") and progress[-1] == "reconcile ..."
    # --quiet (cron): the failure's one line and nothing else
    assert jobs_run("debezium", small_raw, tmp_path / "lake", "p", "r1", "--source-counts", DOWN_DB, "--quiet") == 1
    quiet = capsys.readouterr()
    assert quiet.out == "" and len(quiet.err.strip().splitlines()) == 1
    # --debug lets the database driver's own error (whichever class it is) through, with its traceback
    with pytest.raises(Exception) as raised:  # noqa: B017
        jobs_run("debezium", small_raw, tmp_path / "lake", "p", "r1", "--source-counts", DOWN_DB, "--debug")
    assert not isinstance(raised.value, SystemExit)


def test_a_spark_jvm_gone_mid_stage_says_so_and_names_the_heap(tmp_path):
    """The JVM exits on an OutOfMemoryError (or is killed): py4j then says only 'Connection refused',
    which named a service to check where the heap was the problem. A real JVM, killed under a query."""
    script = tmp_path / "gone.py"
    script.write_text(
        "import os, signal, sys\n"
        "from pyspark.sql import SparkSession\n"
        "from jobs.errors import failure_line\n"
        "spark = SparkSession.builder.master('local[1]').getOrCreate()\n"
        "os.kill(spark.sparkContext._gateway.proc.pid, signal.SIGKILL)\n"
        "spark.sparkContext._gateway.proc.wait()\n"
        "try:\n"
        "    spark.range(10).count()\n"
        "except Exception as exc:\n"
        "    print(failure_line('run', 'decode', exc))\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("error: run failed in decode: SparkJvmExited: the Spark JVM stopped"), line
    assert "spark.driver.memory" in line and "Connection refused" not in line
