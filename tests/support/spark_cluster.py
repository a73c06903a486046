"""A Spark standalone cluster for integration tests: one master and one worker (1 core, 1 GB) on free
127.0.0.1 ports, started from the pyspark wheel's own ``bin/spark-class`` (the wheel has no sbin/)::

    with spark_standalone() as cluster:
        cluster.master_url      # "spark://127.0.0.1:PORT", for spark-submit --master
        cluster.work_dir        # the worker's work dir: app-*/<executor>/stderr of each application
        cluster.state()         # the master's /json/: aliveworkers, activeapps, completedapps ...

The worker starts from an environment without PYTHONPATH and in a folder of its own, so that its
executors import ``jobs`` only from what the application ships (``--py-files``), as on a cluster
of other machines. Both processes are stopped by their own PIDs (tests/support/servers.py).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.servers import LOCALHOST, ServerStartError, _log_tail, _port_open, free_port, stop_process


def spark_home() -> str:
    """SPARK_HOME of the venv's pyspark (its jars/ and bin/)."""
    import pyspark

    return str(Path(pyspark.__file__).resolve().parent)


@dataclass(frozen=True)
class SparkCluster:
    master_url: str
    webui_url: str
    work_dir: Path
    root: Path  # the cluster's own folder: logs, the worker's cwd and local dirs

    def state(self) -> dict:
        """The master's state (``/json/``)."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=5) as resp:
            return json.load(resp)

    def logs(self) -> str:
        """The tail of the master's and the worker's logs (for a failing assertion's message)."""
        return "\n".join(f"--- {name}\n{_log_tail(self.root / f'{name}.log', 4000)}" for name in ("master", "worker"))


def _daemon_env(home: str, local_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME", "PYSPARK_PYTHON",
                                                             "PYSPARK_DRIVER_PYTHON", "SPARK_CONF_DIR")}
    env.update({
        "SPARK_HOME": home,
        "SPARK_LOCAL_IP": LOCALHOST,
        "SPARK_LOCAL_DIRS": str(local_dir),
        "SPARK_LOG_DIR": str(local_dir),
        "SPARK_NO_DAEMONIZE": "1",
        # spark-class finds java on PATH; the venv's bin is not needed (executors are told their Python)
        "PATH": os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                if p and Path(p).resolve() != Path(sys.executable).parent.resolve()),
    })
    return env


def _start(name: str, argv: list[str], env: dict[str, str], cwd: Path, root: Path) -> subprocess.Popen:
    with open(root / f"{name}.log", "wb") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                cwd=cwd)


def _wait(name: str, proc: subprocess.Popen, root: Path, ready, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise ServerStartError(f"spark {name} exited with {proc.returncode}: {_log_tail(root / f'{name}.log')}")
        if ready():
            return
        if time.monotonic() > deadline:
            raise ServerStartError(f"spark {name} not ready after {timeout}s: {_log_tail(root / f'{name}.log')}")
        time.sleep(0.25)


def _alive_workers(cluster: SparkCluster) -> int:
    try:
        return int(cluster.state().get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


@contextlib.contextmanager
def spark_standalone(cores: int = 1, memory: str = "1g", timeout: float = 90.0,
                     keep: bool = False) -> Iterator[SparkCluster]:
    """A master and one registered worker; both stopped (by PID) and their folder removed afterwards
    (``keep``: the folder stays, e.g. to read executors' logs after the block)."""
    home = spark_home()
    spark_class = str(Path(home) / "bin" / "spark-class")
    root = Path(tempfile.mkdtemp(prefix="spark-cluster-"))
    work_dir, worker_home, local_dir = root / "work", root / "worker", root / "local"
    for folder in (work_dir, worker_home, local_dir):
        folder.mkdir()
    port, ui_port, worker_ui_port = free_port(), free_port(), free_port()
    cluster = SparkCluster(f"spark://{LOCALHOST}:{port}", f"http://{LOCALHOST}:{ui_port}", work_dir, root)
    env = _daemon_env(home, local_dir)
    procs: list[subprocess.Popen] = []
    try:
        master = _start("master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", LOCALHOST,
                                   "--port", str(port), "--webui-port", str(ui_port)], env, root, root)
        procs.append(master)
        _wait("master", master, root, lambda: _port_open(port) and _port_open(ui_port), timeout)
        worker = _start("worker", [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", LOCALHOST,
                                   "--cores", str(cores), "--memory", memory, "--work-dir", str(work_dir),
                                   "--webui-port", str(worker_ui_port), cluster.master_url],
                        env, worker_home, root)
        procs.append(worker)
        _wait("worker", worker, root, lambda: _alive_workers(cluster) >= 1, timeout)
        yield cluster
    finally:
        for proc in reversed(procs):  # the worker first: it stops its executors
            stop_process(proc, grace_seconds=15.0)
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
