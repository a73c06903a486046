"""The pipeline end to end on an S3 lake: the bundled demo topics landed into ``s3://<bucket>/lake`` on moto's
S3 server, transformed by Spark over ``s3a://`` (the tests' hadoop-aws: tests/support/s3a.py), committed as
Iceberg tables through pyiceberg's SQL catalog on a real PostgreSQL (warehouse ``s3://<bucket>/warehouse``),
reconciled against the demo's counts file and alerted through an SMTP sink; two daily runs, each
``python -m jobs`` as a user runs it. The published state must equal the demo source's own state after
the two days (the simulator that generated the topics: jobs/demo/generate.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobs.demo.generate import build_demo
from jobs.model.intervals import run_id_for
from tests.support.databases import postgres_server
from tests.support.paths import REPO
from tests.support.replay import assert_state_equals_source
from tests.support.s3a import missing_reason, s3a_jars, s3a_spark_conf
from tests.support.servers import create_bucket, s3_client

needs_s3a_jars = pytest.mark.skipif(s3a_jars() is None, reason=missing_reason())

BUCKET = "cdc-s3-lake-e2e"
CATALOG = "s3lake"  # CDC_ICEBERG_CATALOG: pyiceberg's SQL catalog on PostgreSQL, from PYICEBERG_CATALOG__S3LAKE__*
PIPELINE = "demo"
DAYS = [datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC)]
RECIPIENT = "dq@example.com"


def _run_id(day: datetime) -> str:
    return run_id_for(day, day + timedelta(days=1))  # a day's run, as the DAG names it


def _jobs(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "jobs", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, f"jobs {args[0]} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    print(f"jobs {args[0]} --lake {args[args.index('--lake') + 1]}: {time.monotonic() - started:.1f} s")
    return done


def _two_days(topics: Path, lake: str, env: dict[str, str], cwd: Path) -> float:
    """Land and run each demo day into ``lake``, as the README's commands; the wall time in seconds."""
    started = time.monotonic()
    for day in DAYS:
        landed = _jobs(["land", "--from-files", str(topics), "--lake", lake, "--pipeline", PIPELINE,
                        "--start", f"{day:%Y-%m-%dT%H:%M:%SZ}",
                        "--end", f"{day + timedelta(days=1):%Y-%m-%dT%H:%M:%SZ}"], env, cwd)
        raws = [json.loads(line)["path"] for line in landed.stdout.splitlines() if line.startswith("{")]
        assert len(raws) == 3, landed.stdout
        _jobs(["run", "--format", "debezium", "--lake", lake, "--pipeline", PIPELINE, "--run-id", _run_id(day),
               *[a for raw in raws for a in ("--raw", raw)],
               "--source-counts", str(topics.with_name("source_counts.json")), "--alert-to", RECIPIENT], env, cwd)
    return time.monotonic() - started


def _base_env(smtp_port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CDC_", "SMTP_", "PYICEBERG_", "AWS_")) and k != "AIRFLOW_CONN_SMTP_DEFAULT"}
    return {**env, "PYTHONPATH": str(REPO),
            # a fresh JVM per small run: the JIT's quick compiler only (jobs.spark.session); a small data set
            "CDC_JIT": "c1", "CDC_SPARK_MASTER": "local[2]", "CDC_SHUFFLE_PARTITIONS": "2",
            "SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(smtp_port), "SMTP_FROM": "cdc@example.com"}


def _catalog_props(pg_url: str, endpoint: str) -> dict[str, str]:
    # no credentials here: pyiceberg's S3 file IO (pyarrow) takes them from the AWS_* environment
    return {"type": "sql", "uri": pg_url, "warehouse": f"s3://{BUCKET}/warehouse",
            "s3.endpoint": endpoint, "s3.region": "us-east-1"}


def _keys() -> set[str]:
    client = s3_client(os.environ["AWS_ENDPOINT_URL_S3"])
    keys: set[str] = set()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        keys |= {o["Key"] for o in page.get("Contents", [])}
    return keys


def _local_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@needs_s3a_jars
def test_demo_days_on_an_s3_lake_with_a_postgres_catalog(s3_lake_env: str, smtp_sink, tmp_path: Path,
                                                        demo_topics: Path) -> None:
    from pyiceberg.catalog import load_catalog

    from jobs.lake import storage

    endpoint = s3_lake_env
    smtp_port, inbox = smtp_sink
    create_bucket(endpoint, BUCKET)
    lake = f"s3://{BUCKET}/lake"
    s3_cwd = tmp_path / "s3-run"  # the S3 run's working folder: it must stay empty
    s3_cwd.mkdir()
    with postgres_server() as pg_url:
        props = _catalog_props(pg_url, endpoint)
        env = {**_base_env(smtp_port), **{k: v for k, v in os.environ.items() if k.startswith("AWS_")},
               "CDC_SPARK_CONF": s3a_spark_conf(), "CDC_ICEBERG_CATALOG": CATALOG,
               "PYICEBERG_HOME": str(tmp_path / "pyiceberg-home"),  # no user's ~/.pyiceberg.yaml
               **{f"PYICEBERG_CATALOG__{CATALOG.upper()}__{k.upper().replace('.', '__').replace('-', '_')}": v
                  for k, v in props.items()}}
        s3_seconds = _two_days(demo_topics, lake, env, s3_cwd)

        print(f"\ntwo demo days, land + run each: S3 lake (moto, s3a, PostgreSQL catalog) {s3_seconds:.1f} s")

        # the tables are the PostgreSQL catalog's; their metadata and data files are objects of the bucket
        catalog = load_catalog(CATALOG, **props)
        tables = sorted(catalog.list_tables(PIPELINE))
        assert len(tables) == 3, tables
        keys = _keys()
        for ident in tables:
            table = catalog.load_table(ident)
            assert table.metadata_location.startswith(f"s3://{BUCKET}/warehouse/"), table.metadata_location
            assert table.metadata_location.removeprefix(f"s3://{BUCKET}/") in keys
            files = [t.file.file_path for t in table.scan().plan_files()]
            files += [d.file_path for t in table.scan().plan_files() for d in t.delete_files]
            assert files and all(f.startswith(f"s3://{BUCKET}/warehouse/") for f in files), files
            assert {f.removeprefix(f"s3://{BUCKET}/") for f in files} <= keys
        assert any(k.startswith("lake/raw/demo/") for k in keys) and any(k.startswith("lake/reports/demo/") for k in keys)
        assert _local_files(s3_cwd) == []  # nothing of the S3 run went to the local disk

        # every table matches the source's counts; the alert mail about the quarantined messages came
        final = json.loads(storage.read_text(f"{lake}/reports/{PIPELINE}/run={_run_id(DAYS[-1])}/reconciliation.json"))
        assert len(final["tables"]) == 3 and all(r["status"] == "match" for r in final["tables"]), final
        alerts = [json.loads(storage.read_text(f"{lake}/reports/{PIPELINE}/run={_run_id(d)}/alert.json")) for d in DAYS]
        # the demo's 3 malformed messages are quarantined on whichever day they fall: each day with some
        # mails about them alone
        assert sum(r["quarantined"] for a in alerts for r in a["reasons"] if r["kind"] == "quarantine") == 3, alerts
        mailed = [a for a in alerts if a["sent"]]
        assert mailed and all({r["kind"] for r in a["reasons"]} == {"quarantine"} for a in mailed), alerts
        subjects = [" ".join(str(m["Subject"]).split()) for m in inbox.messages()]
        assert subjects == [a["subject"] for a in mailed], subjects
        assert all(e.rcpt_tos == [RECIPIENT] for e in inbox.envelopes)

        # the published state is the source's, row for row (an independent model: the demo's simulator)
        assert_state_equals_source(build_demo(), lake, PIPELINE, with_schema=False, catalog=catalog)
