"""The lake layout of DESIGN.md, for a local folder (the embedded default) or S3.

Every path the pipeline writes is built here, so that no name taken from a message can escape
the lake prefix: pipeline names and run ids are validated, table ids are made safe by
``jobs.canonical.safe_part``.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+=-]{0,199}$")


class LakeError(ValueError):
    """The lake, a pipeline name or a run id is unusable."""


def check_name(kind: str, value: str) -> str:
    if not _NAME.match(value or "") or ".." in value:
        raise LakeError(
            f"{kind} {value!r} is not usable: letters, digits and _ . : + = - only, "
            "not starting with a symbol, no '..'"
        )
    return value


@dataclass(frozen=True)
class Lake:
    """A lake root: a local path, ``file://``, ``s3://`` or ``s3a://`` URI."""

    root: str

    @classmethod
    def at(cls, root: str) -> "Lake":
        parsed = urlparse(root)
        if parsed.scheme in ("s3", "s3a"):
            if not parsed.netloc:
                raise LakeError(f"lake {root!r} names no bucket")
            return cls(f"s3://{parsed.netloc}/{parsed.path.strip('/')}".rstrip("/"))
        if parsed.scheme in ("", "file"):
            path = Path(parsed.path if parsed.scheme == "file" else root).expanduser().resolve()
            return cls(str(path))
        raise LakeError(f"lake {root!r}: only local paths, file://, s3:// and s3a:// are supported")

    # ---- kinds of root --------------------------------------------------------------------
    @property
    def is_s3(self) -> bool:
        return self.root.startswith("s3://")

    def spark_path(self, rel: str) -> str:
        """A path as Spark's Hadoop file systems want it (s3a:// for S3)."""
        full = self.join(rel)
        return "s3a://" + full[len("s3://"):] if self.is_s3 else full

    def join(self, rel: str) -> str:
        rel = rel.strip("/")
        if any(part in ("..", "") for part in rel.split("/")):
            raise LakeError(f"path {rel!r} would leave the lake")
        return f"{self.root}/{rel}"

    def uri(self, rel: str = "") -> str:
        """A URI for pyiceberg / fsspec style consumers."""
        full = self.join(rel) if rel else self.root
        return full if self.is_s3 else Path(full).as_uri()

    # ---- layout ---------------------------------------------------------------------------
    def raw_dir(self, pipeline: str, topic: str, start: str, end: str) -> str:
        from jobs.canonical import safe_part

        return f"raw/{check_name('pipeline', pipeline)}/{safe_part(topic)}/interval={start}_{end}"

    @staticmethod
    def changes_dir(pipeline: str, run_id: str) -> str:
        return f"changes/{check_name('pipeline', pipeline)}/run={check_name('run id', run_id)}"

    @staticmethod
    def quarantine_dir(pipeline: str, run_id: str) -> str:
        return f"quarantine/{check_name('pipeline', pipeline)}/run={check_name('run id', run_id)}"

    @staticmethod
    def report_dir(pipeline: str, run_id: str) -> str:
        return f"reports/{check_name('pipeline', pipeline)}/run={check_name('run id', run_id)}"

    @staticmethod
    def held_dir(pipeline: str) -> str:
        """Records of transactions still open at the end of a run, applied by the run completing them."""
        return f"held/{check_name('pipeline', pipeline)}"

    @staticmethod
    def memory_dir(pipeline: str) -> str:
        """Documents decoders need across runs (Qlik metadata messages), one file per run that found some."""
        return f"decoder-memory/{check_name('pipeline', pipeline)}"

    @property
    def warehouse(self) -> str:
        return "warehouse"

    # ---- small files (reports, manifests) --------------------------------------------------
    def write_text(self, rel: str, text: str) -> str:
        full = self.join(rel)
        if self.is_s3:
            bucket, key = _split_s3(full)
            _s3().put_object(Bucket=bucket, Key=key, Body=text.encode("utf-8"))
        else:
            os.makedirs(os.path.dirname(full), exist_ok=True)
            tmp = full + ".tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, full)  # readers never see half a report
        return full

    def read_text(self, rel: str) -> str:
        full = self.join(rel)
        if self.is_s3:
            bucket, key = _split_s3(full)
            return _s3().get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8")
        with open(full, encoding="utf-8") as fh:
            return fh.read()

    def exists(self, rel: str) -> bool:
        full = self.join(rel)
        if self.is_s3:
            bucket, key = _split_s3(full)
            resp = _s3().list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
            return resp.get("KeyCount", 0) > 0
        return os.path.exists(full)

    def list_files(self, rel: str) -> list[str]:
        """Relative paths of the files directly under folder ``rel`` (none when it does not exist)."""
        full = self.join(rel)
        if self.is_s3:
            bucket, prefix = _split_s3(full + "/")
            names = []
            for page in _s3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
                names += [o["Key"][len(prefix):] for o in page.get("Contents", [])]
        else:
            names = [e.name for e in os.scandir(full) if e.is_file()] if os.path.isdir(full) else []
        return sorted(f"{rel.strip('/')}/{n}" for n in names if n and not n.endswith(".tmp"))

    def write_json(self, rel: str, obj: Any) -> str:
        return self.write_text(rel, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")

    def read_json(self, rel: str) -> Any:
        return json.loads(self.read_text(rel))

    def check_usable(self) -> None:
        """Fail early, with one clear line, on a lake that cannot be written."""
        if self.is_s3:
            bucket, _ = _split_s3(self.root + "/")
            try:
                _s3().head_bucket(Bucket=bucket)
            except Exception as exc:  # noqa: BLE001 - any client error means unusable
                raise LakeError(f"lake {self.root}: bucket not reachable ({type(exc).__name__})") from None
            return
        path = Path(self.root)
        if path.exists() and not path.is_dir():
            raise LakeError(f"lake {self.root} is a file, not a folder")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LakeError(f"lake {self.root} cannot be created: {exc.strerror}") from None
        # a file written and removed: permission bits do not tell (root ignores them, a read-only mount not)
        probe = path / f".cdc-write-probe-{os.getpid()}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise LakeError(f"lake {self.root} is not writable ({exc.strerror}): check the folder's owner, "
                            "permissions and mount") from None


def _split_s3(full: str) -> tuple[str, str]:
    parsed = urlparse(full)
    return parsed.netloc, parsed.path.lstrip("/")


def _s3():
    """A boto3 S3 client; endpoint and credentials come from the environment (never logged)."""
    import boto3

    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    return boto3.client("s3", endpoint_url=endpoint) if endpoint else boto3.client("s3")
