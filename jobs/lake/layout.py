"""The lake layout (docs/design/lake-and-tables.md), for a local folder (the embedded default) or S3.

Every path the pipeline writes is built here, so that no name taken from a message can escape
the lake prefix: pipeline names (jobs.model.names) and run ids are validated, table ids are made safe by
``jobs.model.record.safe_part``.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from jobs.lake import storage
from jobs.model.names import pipeline_name_problem

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+=-]{0,199}$")


class LakeError(ValueError):
    """The lake, a pipeline name or a run id is unusable."""


def check_name(kind: str, value: str) -> str:
    """``value`` when it may name a ``kind``: a pipeline by jobs.model.names' rule (the pipeline files' too), a
    run id by the wider one here."""
    if kind == "pipeline":
        problem = pipeline_name_problem(value)
        if problem:
            raise LakeError(f"pipeline {problem}")
        return value
    if not _NAME.match(value or "") or ".." in value:
        raise LakeError(
            f"{kind} {value!r} is not usable: letters, digits and _ . : + = - only, "
            "not starting with a symbol, no '..'"
        )
    return value


@dataclass(frozen=True)
class Lake:
    """A lake root: a local path, ``file://``, ``s3://`` or ``s3a://`` URI; and the Iceberg catalog its tables
    are in: a pyiceberg catalog's name (a run's settings: jobs.settings), None for the SQLite catalog
    embedded in the lake (jobs.iceberg.catalog.open_catalog)."""

    root: str
    catalog: str | None = None

    @classmethod
    def at(cls, root: str, catalog: str | None = None) -> Lake:
        from jobs.errors import CREDENTIALS_FIX, mask, uri_credentials

        held = uri_credentials(root)
        if held:
            raise LakeError(f"lake {mask(root)} holds credentials ({held}); fix: {CREDENTIALS_FIX}")
        parsed = urlparse(root)
        if parsed.scheme in ("s3", "s3a"):
            if not parsed.netloc:
                raise LakeError(f"lake {root!r} names no bucket")
            return cls(f"s3://{parsed.netloc}/{parsed.path.strip('/')}".rstrip("/"), catalog or None)
        if parsed.scheme in ("", "file"):
            path = Path(parsed.path if parsed.scheme == "file" else root).expanduser().resolve()
            return cls(str(path), catalog or None)
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
    @staticmethod
    def raw_pipeline_dir(pipeline: str) -> str:
        """Every topic's landed intervals of a pipeline: a folder per topic."""
        return f"raw/{check_name('pipeline', pipeline)}"

    def raw_dir(self, pipeline: str, topic: str, start: str, end: str) -> str:
        from jobs.model.record import safe_part

        return f"{self.raw_pipeline_dir(pipeline)}/{safe_part(topic)}/interval={start}_{end}"

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
    def counts_dir(pipeline: str) -> str:
        """The lake's counts through time (jobs.lake.ledger) and the source's checkpoints
        (jobs.reconcile.checkpoints)."""
        return f"counts/{check_name('pipeline', pipeline)}"

    @staticmethod
    def lease_dir(pipeline: str) -> str:
        """The pipeline's lease: which attempt may transform it now (jobs.lake.lease)."""
        return f"leases/{check_name('pipeline', pipeline)}"

    @staticmethod
    def memory_dir(pipeline: str) -> str:
        """Documents decoders need across runs (Qlik metadata messages), one file per run that found some."""
        return f"decoder-memory/{check_name('pipeline', pipeline)}"

    @property
    def warehouse(self) -> str:
        return "warehouse"

    # ---- files (reports, manifests, landed snapshots): jobs.lake.storage, local or S3 alike -------
    def write_text(self, rel: str, text: str) -> str:
        full = self.join(rel)
        storage.write_text(full, text)  # readers never see half a report
        return full

    def read_text(self, rel: str) -> str:
        return storage.read_text(self.join(rel))

    def exists(self, rel: str) -> bool:
        return storage.exists(self.join(rel))

    def list_files(self, rel: str, recursive: bool = False) -> list[str]:
        """Relative paths of the files under folder ``rel`` (directly under it, unless ``recursive``);
        none when it does not exist."""
        base = rel.strip("/")
        found = storage.list_files(self.join(rel), recursive=recursive)
        return [f"{base}/{f.rel}" for f in found if not f.rel.endswith(".tmp")]  # a write under way

    def write_json(self, rel: str, obj: Any) -> str:
        return self.write_text(rel, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")

    def read_json(self, rel: str) -> Any:
        return json.loads(self.read_text(rel))

    def make_dirs(self, rel: str) -> None:
        storage.make_dirs(self.join(rel))

    def delete_tree(self, rel: str) -> None:
        storage.delete_tree(self.join(rel))

    def upload(self, local: str, rel: str) -> str:
        """Copy a local file (or folder) into the lake at ``rel``; its full path."""
        full = self.join(rel)
        storage.upload(local, full)
        return full

    def check_usable(self) -> None:
        """Fail early, with one clear line, on a lake that cannot be written."""
        if self.is_s3:
            try:
                found = storage.exists(f"s3://{urlparse(self.root).netloc}")
            except OSError as exc:
                raise LakeError(f"lake {self.root}: bucket not reachable ({type(exc).__name__})") from None
            if not found:
                raise LakeError(f"lake {self.root}: bucket not reachable (no such bucket)")
            return
        if storage.exists(self.root) and not storage.is_dir(self.root):
            raise LakeError(f"lake {self.root} is a file, not a folder")
        try:
            storage.make_dirs(self.root)
        except OSError as exc:
            raise LakeError(f"lake {self.root} cannot be created: {_reason(exc)}") from None
        # a file written and removed: permission bits do not tell (root ignores them, a read-only mount not)
        probe = self.join(f".cdc-write-probe-{os.getpid()}")
        try:
            storage.write_bytes(probe, b"")
            storage.delete_file(probe)
        except OSError as exc:
            raise LakeError(f"lake {self.root} is not writable ({_reason(exc)}): check the folder's owner, "
                            "permissions and mount") from None


def _reason(exc: OSError) -> str:
    # pyarrow's messages repeat the path; the error number's text is the part worth a line
    return os.strerror(exc.errno) if exc.errno else str(exc)
