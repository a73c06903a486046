"""jobs.lake.storage on a local folder, and Lake through it (S3: tests/integration/test_storage_s3.py)."""
from __future__ import annotations

import os
import pickle
import time
from pathlib import Path

import pytest

from jobs.lake import storage
from jobs.lake.layout import Lake, LakeError
from jobs.lake.storage import file_infos as list_file_info


def test_locations_name_one_place_whatever_their_form(tmp_path: Path, monkeypatch) -> None:
    assert storage.uri(str(tmp_path / "a")) == f"file://{tmp_path}/a"
    assert storage.uri(f"file://{tmp_path}/a/") == f"file://{tmp_path}/a"
    assert storage.local_path(f"file://{tmp_path}/a") == f"{tmp_path}/a"
    monkeypatch.chdir(tmp_path)
    assert storage.local_path("rel/x") == f"{tmp_path}/rel/x"
    assert storage.uri("s3a://bucket/some/key/") == "s3://bucket/some/key"
    assert storage.local_path("s3://bucket/k") is None
    assert storage.is_s3("s3a://b/k") and storage.is_s3("s3://b/k") and not storage.is_s3("/s3://x")


def test_whole_files_round_trip_and_leave_no_temporary_file(tmp_path: Path) -> None:
    target = str(tmp_path / "deep" / "er" / "doc.json")
    storage.write_text(target, "first ü")
    storage.write_text(target, "second ü")  # replaced whole
    assert storage.read_text(target) == "second ü"
    storage.write_bytes(f"file://{tmp_path}/b.bin", b"\x00\xff")
    assert storage.read_bytes(str(tmp_path / "b.bin")) == b"\x00\xff"
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["b.bin", "doc.json"]
    with pytest.raises(FileNotFoundError):
        storage.read_text(str(tmp_path / "missing.json"))


def test_exists_and_is_dir(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("x")
    assert storage.exists(str(tmp_path / "d")) and storage.is_dir(str(tmp_path / "d"))
    assert storage.exists(f"file://{tmp_path}/d/f") and not storage.is_dir(str(tmp_path / "d" / "f"))
    assert not storage.exists(str(tmp_path / "nothing")) and not storage.is_dir(str(tmp_path / "nothing"))


def _tree(root: Path) -> None:
    for rel, text in {"a/1.parquet": "1", "a/b/2.parquet": "22", "a/b/3.txt": "333", "a/.hidden.crc": "h",
                      "top.parquet": "t"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "empty").mkdir()


def test_listings(tmp_path: Path) -> None:
    _tree(tmp_path)
    before = time.time()
    os.utime(tmp_path / "top.parquet", (before - 100, before - 100))
    every = storage.list_files(str(tmp_path))
    assert [f.rel for f in every] == ["a/.hidden.crc", "a/1.parquet", "a/b/2.parquet", "a/b/3.txt", "top.parquet"]
    assert [f.uri for f in every] == [f"file://{tmp_path}/{f.rel}" for f in every]
    assert [f.size for f in every] == [1, 1, 2, 3, 1]
    assert every[-1].mtime == pytest.approx(before - 100, abs=0.01)
    assert [f.rel for f in storage.list_files(str(tmp_path), suffix=".parquet")] == \
        ["a/1.parquet", "a/b/2.parquet", "top.parquet"]
    assert [f.rel for f in storage.list_files(f"file://{tmp_path}/a", recursive=False)] == [".hidden.crc", "1.parquet"]
    assert storage.list_dirs(str(tmp_path)) == ["a", "empty"]
    # nothing below a missing folder or a file
    for where in (tmp_path / "missing", tmp_path / "top.parquet"):
        assert storage.list_files(str(where)) == [] and storage.list_dirs(str(where)) == []


def test_deletes_and_folders(tmp_path: Path) -> None:
    _tree(tmp_path)
    storage.delete_file(str(tmp_path / "top.parquet"))
    storage.delete_tree(str(tmp_path / "a"))
    storage.delete_tree(str(tmp_path / "a"))  # gone already: nothing to do
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]
    storage.make_dirs(f"file://{tmp_path}/x/y")
    storage.make_dirs(str(tmp_path / "x" / "y"))
    assert (tmp_path / "x" / "y").is_dir()


def test_upload_and_download(tmp_path: Path) -> None:
    _tree(tmp_path / "src")
    storage.upload(str(tmp_path / "src" / "a"), str(tmp_path / "dst" / "copy"))
    assert [f.rel for f in storage.list_files(str(tmp_path / "dst"))] == \
        ["copy/.hidden.crc", "copy/1.parquet", "copy/b/2.parquet", "copy/b/3.txt"]
    storage.upload(str(tmp_path / "src" / "top.parquet"), f"file://{tmp_path}/dst/one/top.parquet")
    storage.download(str(tmp_path / "dst" / "one" / "top.parquet"), str(tmp_path / "back.parquet"))
    assert (tmp_path / "back.parquet").read_text() == "t"


def test_s3_settings_come_from_the_environment_and_hold_no_secret(monkeypatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:2")  # the S3 one wins, as in boto3
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-k3y")
    filesystem = storage._s3()
    assert filesystem is storage._s3()  # one per process and settings
    assert filesystem.__reduce__()[1][0]["endpoint_override"] == "http://127.0.0.1:2"
    assert b"s3cr3t-k3y" not in pickle.dumps(filesystem) and "s3cr3t-k3y" not in repr(filesystem)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    assert storage._s3().__reduce__()[1][0]["endpoint_override"] == "http://127.0.0.1:1"


# ---- Lake and the listing helpers through it -----------------------------------------------------
def test_lake_files(tmp_path: Path) -> None:
    lake = Lake.at(str(tmp_path / "lake"))
    lake.check_usable()
    assert lake.write_json("reports/p/run=1/a.json", {"x": 1}) == f"{tmp_path}/lake/reports/p/run=1/a.json"
    lake.write_text("reports/p/run=1/sub/b.txt", "b")
    (tmp_path / "lake" / "reports" / "p" / "run=1" / "c.json.tmp").write_text("a write under way")
    assert lake.read_json("reports/p/run=1/a.json") == {"x": 1} and lake.exists("reports/p/run=1/a.json")
    assert lake.list_files("reports/p/run=1") == ["reports/p/run=1/a.json"]
    assert lake.list_files("reports/p/run=1/", recursive=True) == \
        ["reports/p/run=1/a.json", "reports/p/run=1/sub/b.txt"]
    assert lake.list_files("reports/none") == []
    lake.delete_tree("reports/p")
    assert not lake.exists("reports/p") and lake.exists("reports")
    (tmp_path / "f.txt").write_text("x")
    assert lake.upload(str(tmp_path / "f.txt"), "raw/f.txt") == f"{tmp_path}/lake/raw/f.txt"
    assert lake.read_text("raw/f.txt") == "x"
    assert not list((tmp_path / "lake").glob(".cdc-write-probe-*"))


def test_a_lake_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(LakeError, match="is a file"):
        Lake.at(str(tmp_path / "file")).check_usable()
    with pytest.raises(LakeError, match="cannot be created: Not a directory"):
        Lake.at(str(tmp_path / "file" / "lake")).check_usable()


def test_lake_listings_skip_hidden_files(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert [(u, s) for u, _, s in list_file_info(f"file://{tmp_path}/a")] == \
        [(f"file://{tmp_path}/a/1.parquet", 1), (f"file://{tmp_path}/a/b/2.parquet", 2),
         (f"file://{tmp_path}/a/b/3.txt", 3)]
    assert [u for u, _, _ in list_file_info(str(tmp_path), ".parquet")] == \
        [f"file://{tmp_path}/{rel}" for rel in ("a/1.parquet", "a/b/2.parquet", "top.parquet")]


def test_of_writers_creating_one_file_at_once_exactly_one_does_and_it_is_whole(tmp_path: Path) -> None:
    import threading

    for round_ in range(20):
        target = str(tmp_path / f"r{round_}" / "lease.json")
        start = threading.Barrier(4)
        created = []

        def create(i: int, target=target, start=start, created=created) -> None:
            start.wait()
            if storage.create_exclusive(target, f"writer {i} ".encode() * 1000):
                created.append(i)

        threads = [threading.Thread(target=create, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(created) == 1
        assert storage.read_bytes(target) == f"writer {created[0]} ".encode() * 1000
    assert not storage.create_exclusive(f"file://{tmp_path}/r0/lease.json", b"again")
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["lease.json"] * 20  # no temporary file


def test_a_folder_made_while_it_is_listed_is_listed_again(tmp_path):
    """pyarrow refuses to list a folder another thread makes at that moment (two attempts racing for a
    pipeline's first lease): the listing is tried again, and sees it."""
    import pyarrow.fs as pafs

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "0.json").write_text("{}")

    class Racing(pafs.LocalFileSystem):
        calls = 0

        def get_file_info(self, selector):
            Racing.calls += 1
            if Racing.calls == 1:
                raise FileNotFoundError(f"Cannot list directory '{selector.base_dir}'")
            return super().get_file_info(selector)

    found = storage._below(Racing(), str(tmp_path / "d"), False)
    assert [i.base_name for i in found] == ["0.json"] and Racing.calls == 2
