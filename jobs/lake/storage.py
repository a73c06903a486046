"""The lake's files through one API, whether they live in a local folder or on S3 (pyarrow.fs).

A location is a local path, a ``file://`` URI, or an ``s3://`` / ``s3a://`` URI. S3 settings come from
the environment as boto3 reads them: the endpoint from ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``
(pyarrow reads neither by itself), the CA bundle from ``AWS_CA_BUNDLE``, and the credentials and
region from the AWS SDK's default chain (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and the config files, web identity, the instance role;
``AWS_REGION`` / ``AWS_DEFAULT_REGION``). This module never logs them or puts them in a message.

S3 has no folders. A folder is the prefix of its keys: it exists while a key lies below it, and
making one does nothing. pyarrow's ``create_dir`` would write an empty ``folder/`` marker object,
so this module never calls it on S3. pyarrow's deletes also write a marker for the parent of what they
delete (see ``delete_tree``), and listings here skip markers.
"""
from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass
from urllib.parse import urlparse

from pyarrow import fs as pafs

from jobs import env

_S3_SCHEMES = ("s3://", "s3a://")
# what the S3 file system depends on: a change (a test's own server) gets a new one
_S3_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_CA_BUNDLE", "AWS_REGION", "AWS_DEFAULT_REGION",
           "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


@dataclass(frozen=True, order=True)
class FileEntry:
    """A file found by ``list_files``."""

    uri: str  # s3://bucket/key or file:///absolute/path
    rel: str  # its path below the folder listed, '/'-separated
    size: int
    mtime: float  # epoch seconds


def is_s3(location: str) -> bool:
    return location.startswith(_S3_SCHEMES)


def local_path(location: str) -> str | None:
    """The absolute path of a local location; None for S3."""
    if is_s3(location):
        return None
    return os.path.abspath(urlparse(location).path if location.startswith("file:") else location)


def uri(location: str) -> str:
    """``s3://bucket/key`` or ``file:///absolute/path``: the form listings give and pyiceberg's FileIO reads."""
    return f"s3://{_path(location)}" if is_s3(location) else f"file://{_path(location)}"


def _path(location: str) -> str:
    """The path as pyarrow's file systems name it: ``bucket/key`` on S3, absolute locally."""
    return location.split("://", 1)[1].strip("/") if is_s3(location) else local_path(location)


def _resolve(location: str) -> tuple[pafs.FileSystem, str]:
    return (_s3() if is_s3(location) else pafs.LocalFileSystem()), _path(location)


def file_system(location: str) -> tuple[pafs.FileSystem, str]:
    """pyarrow's file system of ``location`` and the path on it (for readers of file metadata, such as
    Parquet footers)."""
    return _resolve(location)


def _s3() -> pafs.S3FileSystem:
    # the process id too: the AWS SDK's connections must not be shared with a forked child
    return _s3_for(os.getpid(), tuple(env.get(name) for name in _S3_ENV))


@functools.lru_cache(maxsize=4)
def _s3_for(pid: int, env: tuple[str | None, ...]) -> pafs.S3FileSystem:
    settings = dict(zip(_S3_ENV, env))
    return pafs.S3FileSystem(
        endpoint_override=settings["AWS_ENDPOINT_URL_S3"] or settings["AWS_ENDPOINT_URL"],
        tls_ca_file_path=settings["AWS_CA_BUNDLE"],
        # a small file is then one PUT when closed, not a three-request multipart upload
        allow_delayed_open=True,
    )


# ---- whole files ---------------------------------------------------------------------------------
def read_bytes(location: str) -> bytes:
    filesystem, path = _resolve(location)
    with filesystem.open_input_stream(path) as stream:
        return stream.read()


def read_text(location: str) -> str:
    return read_bytes(location).decode("utf-8")


def write_bytes(location: str, data: bytes) -> None:
    """Write a whole file, which readers never see half written: an S3 object appears when its upload
    completes; a local file is written beside its place (``<name>.tmp``) and renamed over it."""
    filesystem, path = _resolve(location)
    if is_s3(location):
        with filesystem.open_output_stream(path) as out:
            out.write(data)
        return
    filesystem.create_dir(os.path.dirname(path), recursive=True)
    tmp = path + ".tmp"
    with filesystem.open_output_stream(tmp) as out:
        out.write(data)
    filesystem.move(tmp, path)


def write_text(location: str, text: str) -> None:
    write_bytes(location, text.encode("utf-8"))


def create_exclusive(location: str, data: bytes) -> bool:
    """Create a whole file only where none is: True when this call created it, False when a file was
    there (or another writer's create of it was under way). One of any number of concurrent callers
    succeeds: locally a hard link of a written temporary file (atomic, and never half written); on S3 a
    conditional PUT (``If-None-Match: *``), through boto3 as pyarrow has no conditional write."""
    if is_s3(location):
        return _s3_create_exclusive(location, data)
    path = _path(location)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}-{threading.get_ident()}.tmp"
    with open(tmp, "wb") as out:
        out.write(data)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def _s3_create_exclusive(location: str, data: bytes) -> bool:
    from botocore.exceptions import ClientError

    bucket, _, key = _path(location).partition("/")
    try:
        _boto3_s3(os.getpid(), tuple(env.get(name) for name in _S3_ENV)).put_object(
            Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        return True
    except ClientError as exc:
        # 412: the object exists; 409: a concurrent conditional write of the same key is under way
        if exc.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):
            return False
        raise


@functools.lru_cache(maxsize=4)
def _boto3_s3(pid: int, env: tuple[str | None, ...]):
    import boto3

    settings = dict(zip(_S3_ENV, env))
    return boto3.session.Session().client(
        "s3", endpoint_url=settings["AWS_ENDPOINT_URL_S3"] or settings["AWS_ENDPOINT_URL"],
        verify=settings["AWS_CA_BUNDLE"] or None)


# ---- what is there -------------------------------------------------------------------------------
def exists(location: str) -> bool:
    """A file, or a folder (on S3: a prefix with keys below it)."""
    filesystem, path = _resolve(location)
    return filesystem.get_file_info(path).type != pafs.FileType.NotFound


def is_dir(location: str) -> bool:
    filesystem, path = _resolve(location)
    return filesystem.get_file_info(path).type == pafs.FileType.Directory


def _below(filesystem: pafs.FileSystem, path: str, recursive: bool) -> list[pafs.FileInfo]:
    selector = pafs.FileSelector(path, recursive=recursive, allow_not_found=True)
    tries = 3
    while True:
        try:
            return filesystem.get_file_info(selector)
        except NotADirectoryError:
            return []  # a local file: nothing lies below it
        except FileNotFoundError:
            # the folder was made (or an entry went) while it was listed, e.g. by an attempt racing for the
            # first lease: list it again, now that it is there
            tries -= 1
            if not tries:
                raise


def list_dirs(location: str) -> list[str]:
    """The names of the folders directly under ``location``, sorted; none when it does not exist."""
    filesystem, path = _resolve(location)
    return sorted(i.base_name for i in _below(filesystem, path, False) if i.type == pafs.FileType.Directory)


def list_files(location: str, *, recursive: bool = True, suffix: str = "") -> list[FileEntry]:
    """The files under folder ``location`` (at any depth, or directly under it) whose names end with
    ``suffix``, sorted by URI; none when the folder does not exist."""
    filesystem, path = _resolve(location)
    base = uri(location)
    found = []
    for info in _below(filesystem, path, recursive):
        if info.type == pafs.FileType.File and info.path.endswith(suffix):
            rel = info.path[len(path):].lstrip("/")
            mtime = info.mtime_ns / 1e9 if info.mtime_ns is not None else 0.0
            found.append(FileEntry(f"{base}/{rel}", rel, info.size, mtime))
    return sorted(found)


# ---- changes -------------------------------------------------------------------------------------
def make_dirs(location: str) -> None:
    """Create a local folder and its parents; nothing on S3, where a folder is only a key prefix."""
    if not is_s3(location):
        filesystem, path = _resolve(location)
        filesystem.create_dir(path, recursive=True)


def delete_file(location: str) -> None:
    filesystem, path = _resolve(location)
    filesystem.delete_file(path)


def delete_tree(location: str) -> None:
    """Delete a folder and everything below it; nothing when it does not exist.

    On S3, pyarrow then writes an empty marker object for the parent folder (``parent/``), so that
    the parent stays visible as a folder. There is no option to turn this off. Listings here skip
    markers."""
    filesystem, path = _resolve(location)
    try:
        filesystem.delete_dir(path)
    except FileNotFoundError:
        pass


def upload(local: str, location: str) -> None:
    """Copy a local file to ``location``, or each file of a local folder to the same place below it."""
    filesystem, path = _resolve(location)
    if os.path.isdir(local):
        pairs = [(os.path.join(local, e.rel), f"{path}/{e.rel}") for e in list_files(local)]
    else:
        pairs = [(local, path)]
    for source, target in pairs:
        if not is_s3(location):
            filesystem.create_dir(os.path.dirname(target), recursive=True)
        # one file at a time: copy_files of a folder would write a marker object per folder on S3
        pafs.copy_files(source, target, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=filesystem)


def download(location: str, local: str) -> None:
    """Copy the file at ``location`` to the local path ``local``."""
    filesystem, path = _resolve(location)
    pafs.copy_files(path, local, source_filesystem=filesystem, destination_filesystem=pafs.LocalFileSystem())


def parquet_dataset(location: str):
    """The Parquet files under a folder as one pyarrow dataset (Spark's ``_SUCCESS`` and ``.crc`` files
    are skipped), read in batches by whoever scans it."""
    import pyarrow.dataset as ds

    filesystem, path = _resolve(location)
    return ds.dataset(path, filesystem=filesystem, format="parquet", exclude_invalid_files=False)


def file_uris(uri: str, suffix: str = "") -> list[str]:
    """The files under a folder of the lake, at any depth, whose names end with ``suffix``: sorted URIs
    (``s3://`` or ``file://``), as pyiceberg's FileIO reads and deletes them."""
    return [path for path, _, _ in file_infos(uri, suffix)]


def file_infos(uri: str, suffix: str = "") -> list[tuple[str, float, int]]:
    """(URI, modification time as epoch seconds, bytes) of each file file_uris names, in its order."""
    # hidden names are no file of the lake's: the .crc checksums Hadoop writes beside local files
    return [(f.uri, f.mtime, f.size) for f in list_files(uri, suffix=suffix)
            if not any(part.startswith(".") for part in f.rel.split("/"))]
