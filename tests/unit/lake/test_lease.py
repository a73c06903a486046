"""jobs.lake.lease on a local lake: one attempt of a pipeline at a time, taken at once by exactly one of
attempts racing for it, given back, lapsed when its holder stalls or dies, and the stalled holder told
before it commits. Attempts are threads of this process, or a Python child process where a test stops
or kills the holder (on S3: tests/integration/test_storage_s3.py)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jobs.lake.layout import Lake
from jobs.lake.lease import Lease, LeaseHeld, attempt_folder, new_attempt_id
from tests.support.paths import REPO

PIPELINE = "p"


def _race(lake: Lake, attempts: int) -> tuple[list[Lease], list[LeaseHeld]]:
    """``attempts`` threads take the lease at the same moment: those that got it, and the refusals."""
    start = threading.Barrier(attempts)
    held: list[Lease] = []
    refused: list[LeaseHeld] = []

    def attempt(i: int) -> None:
        lease = Lease(lake, PIPELINE, "r1", f"a{i}")
        start.wait()
        try:
            lease.acquire()
            held.append(lease)
        except LeaseHeld as exc:
            refused.append(exc)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(attempts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return held, refused


def test_of_attempts_racing_for_the_lease_exactly_one_gets_it(tmp_path: Path) -> None:
    for round_ in range(20):
        lake = Lake.at(str(tmp_path / f"lake{round_}"))
        held, refused = _race(lake, 2 + round_ % 3)
        assert len(held) == 1, (round_, refused)
        assert len(refused) == 1 + round_ % 3
        for exc in refused:
            message = str(exc)
            assert message.startswith("another attempt of run r1 is running since "), message
            assert f"(host {socket.gethostname()}, pid {os.getpid()};" in message
            assert "re-run run r1" in message and "\n" not in message
        held[0].release()


def test_a_released_lease_is_taken_and_another_run_of_the_pipeline_waits(tmp_path: Path) -> None:
    lake = Lake.at(str(tmp_path / "lake"))
    with Lease(lake, PIPELINE, "r0", "first"):
        with pytest.raises(LeaseHeld, match=r"^run r0 of pipeline p is running \(its runs transform one at a time\) "
                                             r"since .*: let it end \(or stop it\), then re-run run r1;"):
            Lease(lake, PIPELINE, "r1", "second").acquire()
        # another pipeline has a lease of its own
        with Lease(lake, "other", "r1", "third"):
            pass
    second = Lease(lake, PIPELINE, "r1", "second")
    second.acquire()
    second.check()
    second.release()
    # generations before the last holder's are deleted: the folder stays small
    assert len(list((tmp_path / f"lake/leases/{PIPELINE}").glob("*.json"))) == 2


def test_a_holder_keeps_its_lease_past_the_ttl_by_renewing_it(tmp_path: Path) -> None:
    lake = Lake.at(str(tmp_path / "lake"))
    with Lease(lake, PIPELINE, "r1", "keeper", ttl=0.5) as lease:
        time.sleep(1.5)
        with pytest.raises(LeaseHeld):
            Lease(lake, PIPELINE, "r1", "other", ttl=0.5).acquire()
        lease.check()


def _lease_file(tmp_path: Path, generation: int, **holder) -> None:
    folder = tmp_path / "lake" / "leases" / PIPELINE
    folder.mkdir(parents=True, exist_ok=True)
    record = {"attempt": "far", "run_id": "r1", "host": "worker-elsewhere", "pid": 1, "started": None,
              "since": "2026-11-01T00:00:00Z", "renewed": time.time(), "ttl": 60.0, "released": False, **holder}
    (folder / f"{generation:012d}.json").write_text(json.dumps(record))


def test_a_lease_held_on_another_host_lapses_only_when_not_renewed(tmp_path: Path) -> None:
    lake = Lake.at(str(tmp_path / "lake"))
    _lease_file(tmp_path, 7)
    with pytest.raises(LeaseHeld, match=r"since 2026-11-01T00:00:00Z \(host worker-elsewhere, pid 1; lease renewed "
                                         r"0 s ago\).* a lease not renewed for 60 s lapses"):
        Lease(lake, PIPELINE, "r1", "here").acquire()
    _lease_file(tmp_path, 7, renewed=time.time() - 61)
    lease = Lease(lake, PIPELINE, "r1", "here")
    lease.acquire()
    assert lease.generation == 8
    lease.release()


CHILD = """
import sys
from jobs.lake.layout import Lake
from jobs.lake.lease import Lease, LeaseLost
lease = Lease(Lake.at(sys.argv[1]), "p", "r1", "child", ttl=float(sys.argv[2]))
lease.acquire()
print("held", flush=True)
if sys.stdin.readline().strip() == "die":
    import os
    os._exit(0)
try:
    lease.check()
    print("kept", flush=True)
except LeaseLost as exc:
    print(f"lost: {exc}", flush=True)
"""


def _holder(lake_dir: Path, ttl: float) -> subprocess.Popen:
    """A child process holding the lease until told (a line on its stdin) to check it, or to die."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(lake_dir), str(ttl)], cwd=REPO, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_stalled_holder_loses_its_lease_and_is_told_before_it_commits(tmp_path: Path) -> None:
    lake = Lake.at(str(tmp_path / "lake"))
    child = _holder(tmp_path / "lake", ttl=1.0)
    try:
        with pytest.raises(LeaseHeld):
            Lease(lake, PIPELINE, "r1", "retry", ttl=1.0).acquire()
        os.kill(child.pid, signal.SIGSTOP)  # alive, but renewing nothing
        time.sleep(1.5)
        with Lease(lake, PIPELINE, "r1", "retry", ttl=1.0) as retry:
            os.kill(child.pid, signal.SIGCONT)
            out, _ = child.communicate("check\n", timeout=30)
            assert out.startswith("lost: this attempt (child) of run r1 lost the lease of pipeline p: not renewed "
                                  "for over 1 s"), out
            assert "taken by attempt retry of run r1 since " in out and "re-run run r1" in out
            retry.check()  # the stalled one wrote nothing over it
    finally:
        child.kill()
        child.wait()


def test_the_lease_of_an_attempt_gone_from_this_host_is_taken_at_once(tmp_path: Path) -> None:
    lake = Lake.at(str(tmp_path / "lake"))
    child = _holder(tmp_path / "lake", ttl=300.0)
    child.communicate("die\n", timeout=30)  # gone without giving the lease back, as a killed attempt
    with Lease(lake, PIPELINE, "r1", "rerun") as lease:
        assert lease.generation == 1


def test_an_attempt_id_names_a_folder_and_each_attempt_its_own() -> None:
    ids = {new_attempt_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(attempt_folder(i) == f"attempt={i}" for i in ids)
    with pytest.raises(ValueError):
        attempt_folder("../x")


def test_the_lease_time_comes_from_the_environment_and_a_bad_one_is_one_line(tmp_path: Path, monkeypatch) -> None:
    lake = Lake.at(str(tmp_path / "lake"))
    assert Lease(lake, PIPELINE, "r1", "a").ttl == 300
    monkeypatch.setenv("CDC_LEASE_SECONDS", "45")
    assert Lease(lake, PIPELINE, "r1", "a").ttl == 45
    for bad in ("soon", "0", "-5", "inf", "nan"):
        monkeypatch.setenv("CDC_LEASE_SECONDS", bad)
        with pytest.raises(ValueError, match=rf"^CDC_LEASE_SECONDS='{bad}' is not a number of seconds above 0"):
            Lease(lake, PIPELINE, "r1", "a")
