"""An operational failure ends a command with one line that names what failed and what to check, the
exit code the README documents (2: unusable arguments or lake, 1: a stage failed), no traceback
(``--debug`` adds it) and no secret: the masking, the hints, and a lake refused before any work (the
failures of whole runs: tests/integration/test_operational_errors.py)."""
from __future__ import annotations

import pytest

from jobs import cli
from jobs.errors import failure_line, mask, what_to_check
from tests.support.operational import DOWN_DB, SECRET
from tests.support.pipeline_runs import jobs_run


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


def _one_message(tmp_path) -> str:
    raw = tmp_path / "topic.jsonl"
    raw.write_text('{"op": "c"}\n')
    return str(raw)


def test_a_read_only_lake_is_refused_before_any_work(tmp_path, capsys):
    # /sys/kernel: a folder that exists and that not even root may write
    args = ["--format", "debezium", "--raw", _one_message(tmp_path), "--pipeline", "p", "--run-id", "r"]
    assert cli.main(["run", "--lake", "/sys/kernel", *args]) == 2
    assert cli.main(["run", "--lake", "/sys/kernel/cdc-lake", *args]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and "not writable" in lines[0] and "cannot be created" in lines[1]


@pytest.mark.parametrize("text, shown", [
    ("s3://AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY@bucket/lake", "s3://***:***@bucket/lake"),
    ("https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/x", "https://***@github.com/x"),
    ("mysql://u:p%40ss@db:3306/x and then more", "mysql://u:***@db:3306/x and then more"),
    ("s3://b/k?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F1&X-Amz-Signature=abc123&x=1",
     "s3://b/k?X-Amz-Credential=***&X-Amz-Signature=***&x=1"),
    ("jdbc:x://h/db?user=u&password=hunter22;sslmode=require", "jdbc:x://h/db?user=u&password=***;sslmode=require"),
    ("DRIVER={x};SERVER=h;UID=u;PWD=hunter22;", "DRIVER={x};SERVER=h;UID=u;PWD=***;"),
    ("key id AKIAIOSFODNN7EXAMPLE in a message", "key id *** in a message"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "Authorization: Bearer ***"),
    ("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl here", "token *** here"),
    ("api_key=sk_live_1234&secret=s3cr3t client_secret=xyz", "api_key=***&secret=*** client_secret=***"),
    ("lake /data/lake, pipeline orders: key=value; a:b@c; 12:30", "lake /data/lake, pipeline orders: key=value; a:b@c; 12:30"),
])
def test_mask_hides_user_info_and_known_secret_shapes(text, shown):
    assert mask(text) == shown


def test_a_lake_uri_with_credentials_is_refused_saying_where_credentials_go(tmp_path, capsys):
    args = ["--format", "debezium", "--raw", _one_message(tmp_path), "--pipeline", "p", "--run-id", "r"]
    assert cli.main(["run", "--lake", f"s3://AKIAIOSFODNN7EXAMPLE:{SECRET}@bucket/lake", *args]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert SECRET not in line and "AKIAIOSFODNN7EXAMPLE" not in line
    assert line.startswith("error: lake s3://***:***@bucket/lake holds credentials (user info)")
    assert "AWS_ACCESS_KEY_ID" in line and "PYICEBERG_CATALOG__" in line


def test_an_argument_error_never_echoes_a_secret(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["reconcile", "--lake", "/tmp/l", "--pipeline", "p", "--run-id", "r",
                  "--max-lag", f"postgresql://u:{SECRET}@h/db"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert SECRET not in err and "postgresql://u:***@h/db" in err


def test_land_masks_what_its_error_lines_quote(tmp_path, capsys):
    from jobs.land.command import main as land_main

    missing = tmp_path / "AKIAIOSFODNN7EXAMPLE" / "topics"  # a path holding a key id's shape
    assert land_main(["--from-files", str(missing), "--lake", str(tmp_path / "lake"), "--pipeline", "p",
                      "--start", "2026-11-01", "--end", "2026-11-02"]) == 1
    assert land_main(["--from-files", str(missing), "--lake", f"s3://u:{SECRET}@bucket/lake", "--pipeline", "p",
                      "--start", "2026-11-01", "--end", "2026-11-02"]) == 2
    err = capsys.readouterr().err
    assert "AKIAIOSFODNN7EXAMPLE" not in err and SECRET not in err and len(err.strip().splitlines()) == 2
    assert "holds credentials (user info)" in err


# ---- Spark's failures: the root cause of the Java exception chain in the one line ---------------------
def _raised_by(action) -> BaseException:
    with pytest.raises(Exception) as raised:  # noqa: B017 - py4j's or pyspark's, whichever Spark raises
        action()
    return raised.value


def test_a_corrupt_parquet_file_is_named_with_why_it_cannot_be_read(spark, tmp_path):
    bad = tmp_path / "part-0.parquet"
    bad.write_bytes(b"not a parquet file" * 8)
    line = failure_line("run", "decode", _raised_by(lambda: spark.read.parquet(str(bad)).collect()))
    assert "An error occurred while calling" not in line and "\n" not in line
    assert f"RuntimeException: file:{bad} is not a Parquet file" in line, line
    assert "check that the file it names is whole and Parquet" in line


def test_a_run_over_a_corrupt_raw_file_ends_in_that_line(spark, tmp_path, capsys):
    bad = tmp_path / "raw" / "part-0.parquet"
    bad.parent.mkdir()
    bad.write_bytes(b"not a parquet file" * 8)
    assert jobs_run("debezium", bad, tmp_path / "lake", "p", "r1", "--quiet") == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: run failed in decode: ") and f"{bad} is not a Parquet file" in line, line
    assert "check that the file it names is whole and Parquet" in line


def test_a_path_spark_does_not_find_is_named(spark, tmp_path):
    line = failure_line("run", "decode", _raised_by(lambda: spark.read.parquet(str(tmp_path / "nothere"))))
    assert f"AnalysisException: [PATH_NOT_FOUND] Path does not exist: file:{tmp_path}/nothere" in line, line
    assert "check that the file or folder it names exists" in line


def test_a_file_gone_after_the_plan_is_named(spark, tmp_path):
    folder = tmp_path / "state"
    spark.range(10).write.parquet(str(folder))
    frame = spark.read.parquet(str(folder))
    parts = sorted(folder.glob("*.parquet"))
    for part in parts:
        part.unlink()
    line = failure_line("run", "fold_publish", _raised_by(frame.collect))
    assert any(f"FileNotFoundException: File file:{part} does not exist" in line for part in parts), line
    assert "check that the file or folder it names exists" in line


@pytest.fixture
def full_disk(tmp_path):
    """A 256 KiB file system (tmpfs): what a run writes there ends with No space left on device."""
    import subprocess

    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode:
        pytest.skip(f"mounting a tmpfs needs root: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_full_disk_says_so_and_where_to_make_room(spark, full_disk):
    frame = spark.range(200_000).selectExpr("id", "uuid() AS noise")
    exc = _raised_by(lambda: frame.write.parquet(str(full_disk / "out")))
    line = failure_line("run", "fold_publish", exc)
    assert "No space left on device" in line and "An error occurred while calling" not in line, line
    assert "check free space where the run writes" in line
    python_side = failure_line("run", "reconcile", OSError(28, "No space left on device"))
    assert "check free space where the run writes" in python_side


def test_a_locked_embedded_catalog_says_another_run_may_hold_it(tmp_path, capsys):
    import sqlite3

    from jobs.iceberg.catalog import open_catalog
    from jobs.lake.layout import Lake

    lake = Lake.at(str(tmp_path / "lake"))
    open_catalog(lake)  # the catalog's tables, as a first run makes them
    catalog_file = tmp_path / "lake" / "warehouse" / "catalog.db"
    holder = sqlite3.connect(catalog_file, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # as a run committing holds it
    try:
        assert cli.main(["expire", "--lake", lake.root, "--pipeline", "p", "--run-id", "x",
                         "--as-of", "2026-11-24"]) == 1
    finally:
        holder.rollback()
        holder.close()
    line = capsys.readouterr().err.strip().splitlines()[-1]  # after expire's progress line
    assert "database is locked" in line and "CDC_ICEBERG_CATALOG" not in line, line
    assert f"check whether another run of this pipeline is active: the embedded catalog {catalog_file} is " \
           "locked; retry when it ends" in line


def test_an_empty_raw_folder_is_refused_before_any_stage_starts(tmp_path, capsys):
    empty = tmp_path / "raw" / "orders"
    empty.mkdir(parents=True)
    (empty / "_SUCCESS").write_text("")  # bookkeeping only
    assert cli.main(["run", "--format", "debezium", "--raw", str(empty), "--lake", str(tmp_path / "lake"),
                     "--pipeline", "p", "--run-id", "r"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()  # no stage's progress line: none started
    assert line == f"error: --raw {empty}: no Parquet (Kafka source schema) or text files (.jsonl, .json, .txt, " \
                   ".jsonl.gz, .json.gz, .txt.gz) found"


def test_an_out_of_memory_task_points_at_the_drivers_heap():
    from jobs.errors import failure_line

    exc = RuntimeError("Job aborted due to stage failure: java.lang.OutOfMemoryError: Java heap space")
    line = failure_line("run", "decode", exc)
    assert "spark.driver.memory" in line and "OutOfMemoryError" in line
    # outside Spark's stages a refused connection is a service's, not the JVM's
    assert "spark.driver.memory" not in failure_line("run", "reconcile", ConnectionRefusedError(111, "refused"))
