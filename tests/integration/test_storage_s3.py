"""jobs.lake.storage, Lake and the lake's listings on moto's S3 server (the local side: tests/unit/lake/test_storage.py)."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from jobs.iceberg.expire import _delete_tree
from jobs.lake import storage
from jobs.lake.layout import Lake, LakeError
from jobs.lake.raw import RawInputError, parquet_files
from jobs.lake.storage import file_infos as list_file_info
from tests.support.servers import create_bucket, free_port, s3_client, s3_env

pytestmark = pytest.mark.integration


def _keys(endpoint: str, bucket: str) -> list[str]:
    return sorted(o["Key"] for o in s3_client(endpoint).list_objects_v2(Bucket=bucket).get("Contents", []))


@pytest.fixture()
def bucket(s3_lake_env: str, request) -> str:
    name = "st-" + request.node.name.replace("_", "-")[:50].strip("-").lower()
    create_bucket(s3_lake_env, name)
    return name


def _tree(bucket: str) -> None:
    for rel, text in {"a/1.parquet": "1", "a/b/2.parquet": "22", "a/b/3.txt": "333", "a/.hidden": "h",
                      "abc/x.parquet": "x", "top.parquet": "t"}.items():
        storage.write_text(f"s3://{bucket}/{rel}", text)


def test_whole_files_are_one_object_each_and_folders_write_nothing(s3_lake_env: str, bucket: str) -> None:
    storage.write_text(f"s3://{bucket}/d/doc.json", "first ü")
    storage.write_text(f"s3a://{bucket}/d/doc.json", "second ü")
    storage.write_bytes(f"s3://{bucket}/b.bin", b"\x00\xff")
    storage.make_dirs(f"s3://{bucket}/never/made")
    assert storage.read_text(f"s3://{bucket}/d/doc.json") == "second ü"
    assert storage.read_bytes(f"s3a://{bucket}/b.bin") == b"\x00\xff"
    assert _keys(s3_lake_env, bucket) == ["b.bin", "d/doc.json"]  # no marker objects, no temporary files
    with pytest.raises(FileNotFoundError):
        storage.read_text(f"s3://{bucket}/missing.json")


def test_exists_means_an_object_or_a_prefix_folder(s3_lake_env: str, bucket: str) -> None:
    _tree(bucket)
    assert storage.exists(f"s3://{bucket}/a/1.parquet") and not storage.is_dir(f"s3://{bucket}/a/1.parquet")
    assert storage.exists(f"s3://{bucket}/a/b") and storage.is_dir(f"s3://{bucket}/a/b/")
    assert storage.exists(f"s3://{bucket}") and storage.is_dir(f"s3://{bucket}")
    assert not storage.exists(f"s3://{bucket}/ab")  # a prefix of "abc/", not a folder
    assert not storage.exists(f"s3://{bucket}/a/1")
    assert not storage.exists("s3://st-no-such-bucket-here")


def test_listings(s3_lake_env: str, bucket: str) -> None:
    before = time.time()
    _tree(bucket)
    every = storage.list_files(f"s3://{bucket}/a")
    assert [f.rel for f in every] == [".hidden", "1.parquet", "b/2.parquet", "b/3.txt"]
    assert [f.uri for f in every] == [f"s3://{bucket}/a/{f.rel}" for f in every]
    assert [f.size for f in every] == [1, 1, 2, 3]
    assert all(before - 5 <= f.mtime <= time.time() + 5 for f in every)
    assert [f.rel for f in storage.list_files(f"s3a://{bucket}/", suffix=".parquet")] == \
        ["a/1.parquet", "a/b/2.parquet", "abc/x.parquet", "top.parquet"]
    assert [f.rel for f in storage.list_files(f"s3://{bucket}/a", recursive=False)] == [".hidden", "1.parquet"]
    assert storage.list_dirs(f"s3://{bucket}") == ["a", "abc"] and storage.list_dirs(f"s3://{bucket}/a") == ["b"]
    for where in ("missing", "top.parquet"):
        assert storage.list_files(f"s3://{bucket}/{where}") == [] and storage.list_dirs(f"s3://{bucket}/{where}") == []
    # the lake's listing: URIs as pyiceberg names them, without hidden names
    assert [(u, s) for u, _, s in list_file_info(f"s3a://{bucket}/a")] == \
        [(f"s3://{bucket}/a/1.parquet", 1), (f"s3://{bucket}/a/b/2.parquet", 2), (f"s3://{bucket}/a/b/3.txt", 3)]


def test_delete_tree_takes_everything_below_and_nothing_beside(s3_lake_env: str, bucket: str) -> None:
    _tree(bucket)
    storage.delete_tree(f"s3://{bucket}/a/b")
    storage.delete_tree(f"s3://{bucket}/a/b")  # gone already: nothing to do
    storage.delete_tree(f"s3://{bucket}/nothing/here")
    storage.delete_file(f"s3://{bucket}/a/1.parquet")
    assert not storage.exists(f"s3://{bucket}/a/b") and not storage.exists(f"s3://{bucket}/a/1.parquet")
    # pyarrow writes a marker object for the parent of what it deletes; listings do not show it
    assert _keys(s3_lake_env, bucket) == ["a/", "a/.hidden", "abc/x.parquet", "top.parquet"]
    assert [f.rel for f in storage.list_files(f"s3://{bucket}")] == ["a/.hidden", "abc/x.parquet", "top.parquet"]
    storage.delete_tree(f"s3://{bucket}/a")
    assert _keys(s3_lake_env, bucket) == ["abc/x.parquet", "top.parquet"]


def test_upload_and_download(s3_lake_env: str, bucket: str, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "one.txt").write_text("1")
    (src / "sub" / "two.txt").write_text("2")
    big = os.urandom(12 * 1024 * 1024)  # past pyarrow's part size: a multipart upload
    (tmp_path / "big.bin").write_bytes(big)
    storage.upload(str(src), f"s3://{bucket}/up")
    storage.upload(str(tmp_path / "big.bin"), f"s3a://{bucket}/big/big.bin")
    assert _keys(s3_lake_env, bucket) == ["big/big.bin", "up/one.txt", "up/sub/two.txt"]  # no marker objects
    storage.download(f"s3://{bucket}/big/big.bin", str(tmp_path / "back.bin"))
    assert (tmp_path / "back.bin").read_bytes() == big


def test_lake_on_s3(s3_lake_env: str, bucket: str, tmp_path: Path) -> None:
    lake = Lake.at(f"s3a://{bucket}/lake/")
    lake.check_usable()
    assert lake.write_json("reports/p/run=1/a.json", {"x": 1}) == f"s3://{bucket}/lake/reports/p/run=1/a.json"
    lake.write_text("reports/p/run=1/sub/b.txt", "b")
    assert lake.read_json("reports/p/run=1/a.json") == {"x": 1} and lake.exists("reports/p/run=1/a.json")
    assert not lake.exists("reports/p/run=")  # a prefix of keys, not a folder
    assert lake.list_files("reports/p/run=1") == ["reports/p/run=1/a.json"]
    assert lake.list_files("reports/p/run=1", recursive=True) == ["reports/p/run=1/a.json", "reports/p/run=1/sub/b.txt"]
    (tmp_path / "f.txt").write_text("x")
    lake.upload(str(tmp_path / "f.txt"), "raw/f.txt")
    lake.make_dirs("raw/never")
    lake.delete_tree("reports/p")
    assert _keys(s3_lake_env, bucket) == ["lake/raw/f.txt", "lake/reports/"]  # pyarrow's marker of the parent
    assert lake.list_files("reports/p/run=1", recursive=True) == []


def test_unusable_s3_lakes_are_one_line(s3_lake_env: str) -> None:
    with pytest.raises(LakeError, match="no such bucket"):
        Lake.at("s3://st-missing-bucket/lake").check_usable()
    with s3_env(f"http://127.0.0.1:{free_port()}") as env:  # nothing listens there
        with pytest.raises(LakeError, match=r"bucket not reachable \(OSError\)") as caught:
            Lake.at("s3://st-any/lake").check_usable()
    assert env["AWS_SECRET_ACCESS_KEY"] not in str(caught.value)


def test_landed_intervals_read_from_s3(s3_lake_env: str, bucket: str) -> None:
    """parquet_files on S3: a landed interval gives the files its manifest lists; one without a manifest
    is refused."""
    root = f"s3://{bucket}/raw/p/t"
    for name in ("part-0.parquet", "part-1.parquet", "stray.parquet"):
        storage.write_bytes(f"{root}/interval=A_B/{name}", b"PAR1")
    storage.write_text(f"{root}/interval=A_B/_manifest.json",
                       json.dumps({"files": [{"name": "part-0.parquet"}, {"name": "part-1.parquet"}]}))
    assert parquet_files(f"s3a://{bucket}/raw/p/t") == [f"{root}/interval=A_B/part-{i}.parquet" for i in (0, 1)]
    storage.write_bytes(f"{root}/interval=B_C/part-0.parquet", b"PAR1")
    with pytest.raises(RawInputError, match="has no _manifest.json"):
        parquet_files(root)


def test_expire_deletes_a_run_folder_on_s3(s3_lake_env: str, bucket: str) -> None:
    class FileIO:  # pyiceberg's FileIO, as expire uses it
        def delete(self, uri: str) -> None:
            storage.delete_file(uri)

    _tree(bucket)
    assert _delete_tree(FileIO(), f"s3://{bucket}/a") == 3  # the hidden file is no file of the lake's
    assert _keys(s3_lake_env, bucket) == ["abc/x.parquet", "top.parquet"]  # markers gone with the folder


def test_a_file_is_created_once_and_the_lease_taken_once_on_s3(s3_lake_env: str, bucket: str) -> None:
    """The conditional PUT (If-None-Match: *) moto's server answers as S3 does: the first create wins, a
    second is refused and changes nothing; the pipeline's lease over it (jobs.lake.lease) is taken by one
    attempt, refused to the next with the holder named, and taken again once given back."""
    from jobs.lake.lease import Lease, LeaseHeld

    assert storage.create_exclusive(f"s3a://{bucket}/l/one.json", b"first")
    assert not storage.create_exclusive(f"s3://{bucket}/l/one.json", b"second")
    assert storage.read_bytes(f"s3://{bucket}/l/one.json") == b"first"
    lake = Lake.at(f"s3://{bucket}/lake")
    with Lease(lake, "p", "r1", "first") as first:
        with pytest.raises(LeaseHeld, match=r"^another attempt of run r1 is running since .*\(host "):
            Lease(lake, "p", "r1", "second").acquire()
        first.check()
    with Lease(lake, "p", "r2", "third") as third:
        assert third.generation == 1
    assert _keys(s3_lake_env, bucket) == ["l/one.json", "lake/leases/p/000000000000.json",
                                          "lake/leases/p/000000000001.json"]
