"""``expire --dry-run`` writes nothing, not even its report: it works on a lake this user may only read
(a read-only mount), and leaves every file of a writable one as it was. Tables made with pyiceberg
alone (the expiry itself, over Spark-made tables: tests/integration/test_expire.py)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

from jobs import cli
from jobs.iceberg.catalog import open_catalog
from jobs.lake.layout import Lake


def _lake_with_snapshots(root: Path, snapshots: int = 3) -> Path:
    catalog = open_catalog(Lake.at(str(root)))
    catalog.create_namespace("p")
    table = catalog.create_table(("p", "t"), schema=pa.schema([("id", pa.int64())]))
    for i in range(snapshots):
        table.append(pa.table({"id": [i]}))
    return root


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``root``: (size, modification time in ns)."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def _dry_run(lake: Path, *extra: str) -> list[str]:
    return ["expire", "--lake", str(lake), "--pipeline", "p", "--run-id", "x", "--as-of", "2099-01-01",
            "--retain-days", "0", "--retain-last", "1", "--dry-run", *extra]


@pytest.fixture
def read_only(tmp_path):
    """A read-only view of a folder (a bind mount remounted read-only), as an operator's lake may be."""
    view = tmp_path / "read-only"
    view.mkdir()
    mounted = []

    def mount(folder: Path) -> Path:
        done = subprocess.run(["mount", "--bind", str(folder), str(view)], capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"a read-only bind mount needs root: {done.stderr.strip()}")
        mounted.append(view)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
        return view

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=True)


def test_a_dry_run_on_a_read_only_lake_says_what_would_go(tmp_path, read_only, capsys):
    lake = read_only(_lake_with_snapshots(tmp_path / "lake"))
    before = _tree(tmp_path / "lake")
    assert cli.main(_dry_run(lake, "--json")) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dry_run"] is True
    assert [(t["table"], t["snapshots_expired"], t["snapshots_kept"]) for t in report["tables"]] == [("p.t", 2, 1)]
    assert _tree(tmp_path / "lake") == before


def test_a_dry_run_writes_nothing_where_it_could(tmp_path, capsys):
    lake = _lake_with_snapshots(tmp_path / "lake")
    before = _tree(lake)
    assert cli.main(_dry_run(lake)) == 0
    assert "p.t: would expire 2, kept 1" in capsys.readouterr().out
    assert _tree(lake) == before  # no report, no catalog write, no probe file
    empty = tmp_path / "no-lake-yet"
    empty.mkdir()
    assert cli.main(_dry_run(empty, "--json")) == 0  # no catalog: nothing to expire, and none made
    assert json.loads(capsys.readouterr().out)["tables"] == [] and list(empty.iterdir()) == []
