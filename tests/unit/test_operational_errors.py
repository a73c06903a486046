"""An operational failure ends a command with one line that names what failed and what to check, the
exit code the README documents (2: unusable arguments or lake, 1: a stage failed), no traceback
(``--debug`` adds it) and no secret."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from jobs import cli
from jobs.errors import failure_line, mask, what_to_check
from tests.conftest import REPO
from tests.pipeline_runs import jobs_run
from tests.unit.decoder_support import raw_frame

SECRET = "s3cr3t-pw"
# nothing listens on port 9 (discard) of this machine's loopback
DOWN_DB = f"postgresql+psycopg2://cdc:{SECRET}@127.0.0.1:9/source"


def test_a_url_password_is_masked_wherever_a_message_quotes_it():
    assert mask(f"could not connect to {DOWN_DB} (refused)") == \
        "could not connect to postgresql+psycopg2://cdc:***@127.0.0.1:9/source (refused)"
    assert mask("no url here: a:b@c") == "no url here: a:b@c"


def test_the_hint_follows_the_stage_that_failed():
    refused = ConnectionRefusedError("Connection refused")
    assert "source database" in what_to_check("reconcile", refused)
    assert "CDC_ICEBERG_CATALOG" in what_to_check("fold_publish", refused)
    assert "writable" in what_to_check("decode", PermissionError(13, "Permission denied"))
    assert what_to_check("decode", ValueError("bad")) is None
    line = failure_line("run", "reconcile", RuntimeError(f"could not connect to {DOWN_DB}\nDETAIL: more\nlines"))
    assert "\n" not in line and SECRET not in line and line.startswith("error: run failed in reconcile:")


def test_a_read_only_lake_is_refused_before_any_work(capsys):
    # /sys/kernel: a folder that exists and that not even root may write
    args = ["--format", "debezium", "--raw", "/dev/null", "--pipeline", "p", "--run-id", "r"]
    assert cli.main(["run", "--lake", "/sys/kernel", *args]) == 2
    assert cli.main(["run", "--lake", "/sys/kernel/cdc-lake", *args]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and "not writable" in lines[0] and "cannot be created" in lines[1]


@pytest.fixture
def small_raw(spark, tmp_path):
    raw = tmp_path / "raw"
    value = '{"op": "c", "after": {"id": 1}, "source": {"connector": "postgresql", "db": "d", "schema": "s", ' \
            '"table": "t", "lsn": 5}}'
    raw_frame(spark, [value], keys=['{"id": 1}']).write.parquet(str(raw))
    return raw


def test_an_unreachable_source_database_is_one_line_exit_1_and_debug_shows_the_traceback(small_raw, tmp_path,
                                                                                        capsys):
    assert jobs_run("debezium", small_raw, tmp_path / "lake", "p", "r1", "--source-counts", DOWN_DB) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and SECRET not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: run failed in reconcile:") and "source database of --source-counts" in last
    with pytest.raises(Exception):
        jobs_run("debezium", small_raw, tmp_path / "lake", "p", "r1", "--source-counts", DOWN_DB, "--debug")


@pytest.mark.integration
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
