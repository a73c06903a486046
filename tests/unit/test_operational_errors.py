"""An operational failure ends a command with one line that names what failed and what to check, the
exit code the README documents (2: unusable arguments or lake, 1: a stage failed), no traceback
(``--debug`` adds it) and no secret: the masking, the hints, and a lake refused before any work (the
failures of whole runs: tests/integration/test_operational_errors.py)."""
from __future__ import annotations

from jobs import cli
from jobs.errors import failure_line, mask, what_to_check
from tests.support.operational import DOWN_DB, SECRET


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
