"""The checks a commit makes last (jobs.iceberg.write): every folder it names holds exactly the files its attempt
wrote there, and losing a race to another writer says so (the commits themselves: tests/integration/
test_publish_atomicity.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.exceptions import CommitFailedException

from jobs.iceberg.write import CommitConflict, MissingFiles, check_written, commit_conflict
from jobs.lake.storage import file_uris as list_files


def _folder(root: Path, name: str, files: int) -> tuple[str, list[str]]:
    folder = root / name
    for i in range(files):
        (folder / f"_cdc_b={i}").mkdir(parents=True)
        (folder / f"_cdc_b={i}" / f"part-{i}.parquet").write_bytes(b"PAR1")
    (folder / "_SUCCESS").write_bytes(b"")
    return str(folder), list_files(str(folder), ".parquet")


def test_a_commit_names_only_files_still_where_its_attempt_wrote_them(tmp_path: Path) -> None:
    data, data_files = _folder(tmp_path, "data", 3)
    tombstones, tombstone_files = _folder(tmp_path, "tombstones", 1)
    written = {data: data_files, tombstones: tombstone_files}
    check_written("db.s.t", "r1", written)  # all there: nothing said

    Path(data_files[1].removeprefix("file://")).unlink()
    with pytest.raises(MissingFiles) as gone:
        check_written("db.s.t", "r1", written)
    assert str(gone.value) == (f"db.s.t: nothing committed, as {data} changed after this attempt wrote it: 1 of its "
                               f"files are gone (first: {data_files[1]}); another process wrote or deleted there: "
                               "re-run run r1")

    # a reader reads a tombstones folder whole: a file it did not write is as bad as one gone
    check_written("db.s.t", "r1", {tombstones: tombstone_files})
    (Path(tombstones) / "part-9.parquet").write_bytes(b"PAR1")
    with pytest.raises(MissingFiles, match=r"1 files appeared that it did not write \(first: .*/part-9.parquet\)"):
        check_written("db.s.t", "r1", {tombstones: tombstone_files})


def test_losing_a_commit_race_names_the_cause_and_the_fix_in_one_line() -> None:
    cause = CommitFailedException("Table already exists\nmore detail")
    conflict = commit_conflict("db.s.t", "r7", "shop", cause)
    assert isinstance(conflict, CommitConflict)
    assert str(conflict) == ("db.s.t: another attempt or run of pipeline shop committed to the table first (Table "
                             "already exists); nothing of this attempt is published: once no other attempt runs, "
                             "re-run run r7, which leaves what is published alone and commits the rest")


def test_a_refusal_where_tables_commit_one_at_a_time_names_those_already_published() -> None:
    cause = CommitFailedException("db.s.b: CommitFailedException: Requirement failed\nmore detail")
    conflict = commit_conflict("db.s.b", "r7", "shop", cause, committed=["db.s.a"])
    assert str(conflict) == ("db.s.b: another attempt or run of pipeline shop committed to the table first (db.s.b: "
                             "CommitFailedException: Requirement failed); of this attempt only db.s.a are published "
                             "(this catalog commits one table at a time): once no other attempt runs, re-run run r7, "
                             "which leaves what is published alone and commits the rest")
