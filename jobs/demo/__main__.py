"""The README's first command: the whole pipeline end to end on the embedded default.

    .venv/bin/python -m jobs.demo          (from the repository: its demo/ folder)

1. the bundled demo topics (``demo/topics``, made by ``jobs/demo/generate.py`` from a simulated
   PostgreSQL shop, with ``demo/source.db`` as its source database and ``demo/source_counts.json``
   its row counts at the end of each day, with the moment each was true) are landed for the interval
   2026-11-01 .. 2026-11-03 into a local lake (``demo/out/lake``);
2. ``python -m jobs run`` decodes, folds, publishes Iceberg state, validates, reconciles the source's
   counts with the lake's at the same moments and alerts through a local SMTP sink that this script
   runs on 127.0.0.1;
3. the job prints state rows / source rows / status per table, the report folder and whether an
   alert email was sent; the email, if any, is saved under ``demo/out/mail``.
"""
from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from datetime import UTC, datetime
from email import message_from_bytes
from pathlib import Path

from jobs import env

PIPELINE = "demo"
START = datetime(2026, 11, 1, tzinfo=UTC)
END = datetime(2026, 11, 3, tzinfo=UTC)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _MailSink:
    """aiosmtpd handler keeping every message it receives."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
        self.messages.append(envelope.content)
        return "250 OK"


def main() -> int:
    from aiosmtpd.controller import Controller

    from jobs.lake.layout import Lake
    from jobs.land.command import land_files

    # the demo's folder: the checkout's demo/, where make demo runs it
    demo = Path(env.text("CDC_DEMO_DIR") or Path.cwd() / "demo")
    topics, source_db, source_counts, out = (demo / "topics", demo / "source.db", demo / "source_counts.json",
                                             demo / "out")
    if not topics.is_dir() or not source_db.is_file() or not source_counts.is_file():
        subprocess.run([sys.executable, "-m", "jobs.demo.generate", "--out", str(topics),
                        "--source-db", str(source_db)], check=True)
    shutil.rmtree(out, ignore_errors=True)
    lake = Lake.at(str(out / "lake"))
    manifests = land_files(str(topics), None, lake, PIPELINE, START, END)
    raw_dirs = [lake.join(m["path"]) for m in manifests]
    print(f"landed {sum(m['totals']['records'] for m in manifests)} messages of {len(manifests)} topics "
          f"for {START:%Y-%m-%d} .. {END:%Y-%m-%d}")

    sink = _MailSink()
    port = _free_port()
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        smtp = {**env.environment(), "SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(port),
                "SMTP_FROM": "cdc-pipeline@localhost"}
        smtp.pop("AIRFLOW_CONN_SMTP_DEFAULT", None)
        args = [sys.executable, "-m", "jobs", "run", "--format", "debezium", "--lake", str(out / "lake"),
                "--pipeline", PIPELINE, "--run-id", f"{START:%Y%m%dT%H%M%SZ}_{END:%Y%m%dT%H%M%SZ}",
                "--source-counts", str(source_counts), "--alert-to", "data-engineers@localhost"]
        for raw in raw_dirs:
            args += ["--raw", raw]
        code = subprocess.run(args, env=smtp).returncode
    finally:
        controller.stop()
    mail_dir = out / "mail"
    for i, raw in enumerate(sink.messages):
        mail_dir.mkdir(parents=True, exist_ok=True)
        (mail_dir / f"alert-{i}.eml").write_bytes(raw)
        subject = " ".join(str(message_from_bytes(raw)["Subject"]).split())  # unfold the header
        print(f"SMTP sink received: {subject} -> {mail_dir / f'alert-{i}.eml'}")
    if not sink.messages:
        print("SMTP sink received no email")
    return code


if __name__ == "__main__":
    sys.exit(main())
