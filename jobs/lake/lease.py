"""One attempt of a pipeline's transform at a time: a lease in the lake, and the attempt's own id.

Two attempts of a run (an Airflow retry while a stalled attempt still runs, a manual run beside the
scheduled one) or two runs of one pipeline must never fold and commit at once: a run starts from the
state, held records and count ledger its predecessor left, and those logs are rewritten whole. So
``transform`` (and each of its stages run alone) first takes the pipeline's lease, and refuses with
one line naming the attempt that holds it.

The lease is a sequence of small JSON files, ``<lake>/leases/<pipeline>/<generation>.json``, the highest
generation the current one. Taking the lease is creating the next generation's file, which succeeds
for one attempt only (storage.create_exclusive: a hard link locally, a conditional PUT on S3), so it
works on a local lake with the embedded catalog and on S3 with any catalog. The holder renews its file
every ``ttl / 5`` seconds from a thread; a lease not renewed for ``ttl`` seconds (``CDC_LEASE_SECONDS``,
default 300) has lapsed, and so has one whose process is gone from this host, so a killed attempt
blocks nobody for long. An attempt whose lease was taken over meanwhile (it was stopped or starved
past ``ttl``) learns it at its next check, made before each catalog commit and each rewrite of a
pipeline log, and stops there (LeaseLost).

Each attempt also writes the files a commit references under an ``attempt=<id>`` folder of its own
(jobs.iceberg.write, jobs.fold.stage), so that even two attempts that do meet never delete or take each other's.
"""
from __future__ import annotations

import json
import logging
import os
import re
import secrets
import socket
import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from jobs import env
from jobs.lake import storage
from jobs.lake.layout import Lake, check_name

log = logging.getLogger(__name__)

DEFAULT_LEASE_SECONDS = 300.0


def lease_seconds() -> float:
    """How long a lease lives unrenewed: ``CDC_LEASE_SECONDS``, default 300."""
    text = env.text("CDC_LEASE_SECONDS")
    try:
        seconds = float(text) if text else DEFAULT_LEASE_SECONDS
    except ValueError:
        seconds = 0.0
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"CDC_LEASE_SECONDS={text!r} is not a number of seconds above 0: unset it (300) or give "
                         "one such as 600")
    return seconds
_GENERATION = re.compile(r"^(\d{12})\.json$")


class LeaseHeld(RuntimeError):
    """Another attempt of the pipeline holds its lease: this one did nothing."""


class LeaseLost(RuntimeError):
    """This attempt's lease lapsed and another attempt took it over: this one stops before committing."""


def new_attempt_id() -> str:
    """An attempt's id: when it started (UTC) and a random part, e.g. ``20261101T101500Z-3f9a1c2b``."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"


def attempt_folder(attempt: str) -> str:
    """The folder, below a run's, that holds the files of one attempt of the run."""
    return f"attempt={check_name('attempt id', attempt)}"


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command's name (state first), where /proc tells."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot): a pid given to a new process since is no
    longer the holder's."""
    fields = _proc_stat(pid)
    return fields[19] if fields and len(fields) > 19 else None


def _running_here(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    fields = _proc_stat(pid)
    if fields is None:
        return True  # no /proc to tell more
    return fields[0] != "Z" and (started is None or fields[19:20] == [started])  # not a zombie, not a new process


@dataclass(frozen=True)
class Holder:
    """What a lease file says: the attempt holding (or having held) the lease, and when it renewed it."""

    attempt: str
    run_id: str
    host: str
    pid: int
    started: str | None  # the process's start (see _process_start)
    since: str  # when it took the lease, ISO UTC
    renewed: float  # epoch seconds
    ttl: float
    released: bool = False

    def lapsed(self, now: float) -> bool:
        if self.released or now - self.renewed > self.ttl:
            return True
        return self.host == socket.gethostname() and not _running_here(self.pid, self.started)

    def describe(self, now: float) -> str:
        return (f"since {self.since} (host {self.host}, pid {self.pid}; lease renewed "
                f"{max(0, now - self.renewed):.0f} s ago)")

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> Holder:
        return cls(**json.loads(data))


class Lease:
    """The pipeline's lease for one attempt of a run. ``acquire`` takes it or raises LeaseHeld;
    ``check`` raises LeaseLost once another attempt took it over; ``release`` gives it back."""

    def __init__(self, lake: Lake, pipeline: str, run_id: str, attempt: str, ttl: float | None = None) -> None:
        self.folder = lake.join(Lake.lease_dir(pipeline))
        self.pipeline, self.run_id, self.attempt = pipeline, run_id, attempt
        self.ttl = lease_seconds() if ttl is None else ttl
        self.generation: int | None = None
        self._since = ""
        self._lost: Holder | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._writing = threading.Lock()  # the renewing thread and check() write the same file

    # ---- the lease files ------------------------------------------------------------------------
    def _path(self, generation: int) -> str:
        return f"{self.folder}/{generation:012d}.json"

    def _generations(self) -> list[int]:
        found = storage.list_files(self.folder, recursive=False)
        return sorted(int(m.group(1)) for m in (_GENERATION.match(f.rel) for f in found) if m)

    def _read(self, generation: int) -> Holder | None:
        try:
            return Holder.from_bytes(storage.read_bytes(self._path(generation)))
        except FileNotFoundError:
            return None

    def _record(self, released: bool = False) -> Holder:
        return Holder(self.attempt, self.run_id, socket.gethostname(), os.getpid(), _process_start(os.getpid()),
                      self._since, time.time(), self.ttl, released)

    # ---- taking, keeping and giving back ----------------------------------------------------------
    def acquire(self) -> None:
        """Take the lease: the next generation after a released or lapsed one. Raises LeaseHeld naming
        the attempt that holds it."""
        self._since = f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}"
        for _ in range(3):  # a generation another attempt made between the listing and the create: look again
            generations = self._generations()
            top = generations[-1] if generations else -1
            holder = self._read(top) if top >= 0 else None
            if holder is not None and not holder.lapsed(time.time()):
                raise self._held(holder)
            if storage.create_exclusive(self._path(top + 1), self._record().to_bytes()):
                self.generation = top + 1
                self._forget(generations[:-1])  # the one before stays: who held the lease last
                self._start_renewing()
                return
        raise self._held(self._read(self._generations()[-1]))

    def _held(self, holder: Holder | None) -> LeaseHeld:
        if holder is None:
            return LeaseHeld(f"the lease of pipeline {self.pipeline} changed hands while this attempt took it: "
                             f"re-run run {self.run_id}")
        if holder.run_id == self.run_id:
            what = f"another attempt of run {self.run_id} is running"
        else:  # each run starts from the state, held records and ledger the one before left
            what = f"run {holder.run_id} of pipeline {self.pipeline} is running (its runs transform one at a time)"
        return LeaseHeld(f"{what} {holder.describe(time.time())}: let it end (or stop it), then re-run run "
                         f"{self.run_id}; a lease not renewed for {holder.ttl:.0f} s lapses")

    def _forget(self, generations: list[int]) -> None:
        for generation in generations:
            try:
                storage.delete_file(self._path(generation))
            except FileNotFoundError:
                pass

    def _taken_over(self) -> Holder | None:
        newer = [g for g in self._generations() if g > self.generation]
        return self._read(newer[-1]) if newer else None

    def renew(self) -> None:
        """Write this attempt's lease again with the time now, unless another attempt took it over."""
        with self._writing:
            if self._lost is None:
                self._lost = self._taken_over()
            if self._lost is None:
                storage.write_bytes(self._path(self.generation), self._record().to_bytes())

    def check(self) -> None:
        """Raise LeaseLost when another attempt took this one's lease over; else renew it."""
        self.renew()
        if self._lost is not None:
            lost = self._lost
            raise LeaseLost(
                f"this attempt ({self.attempt}) of run {self.run_id} lost the lease of pipeline {self.pipeline}: "
                f"not renewed for over {self.ttl:.0f} s (the process was stopped or starved), it was taken by "
                f"attempt {lost.attempt} of run {lost.run_id} {lost.describe(time.time())}; this attempt "
                f"stopped before committing: re-run run {self.run_id} once that one has ended")

    def _start_renewing(self) -> None:
        def renew_until_stopped() -> None:
            while not self._stop.wait(max(self.ttl / 5, 0.2)):
                try:
                    self.renew()
                except Exception as exc:  # noqa: BLE001 - a lake hiccup: the next round tries again
                    log.warning("could not renew the lease of pipeline %s: %s", self.pipeline, exc)

        self._renewer = threading.Thread(target=renew_until_stopped, name=f"lease-{self.pipeline}", daemon=True)
        self._renewer.start()

    def release(self) -> None:
        """Give the lease back (nothing when another attempt took it over)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        with self._writing:
            if self.generation is not None and self._lost is None and self._taken_over() is None:
                storage.write_bytes(self._path(self.generation), self._record(released=True).to_bytes())
            self.generation = None

    def __enter__(self) -> Lease:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


@dataclass(frozen=True)
class Attempt:
    """One attempt of a run: the id its files are written under, and the lease it commits under
    (none for the fold called directly, as tests and the benchmark do)."""

    id: str
    lease: Lease | None = None

    def check(self) -> None:
        if self.lease is not None:
            self.lease.check()
