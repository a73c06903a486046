"""Everything the Airflow DAG needs, so that the DAG file only wires tasks.

Kept light at import (no pyspark, no Airflow at module level): the DAG processor imports it on
every parse. Settings come from the environment (or Airflow Variables exported as env vars):

    CDC_LAKE            lake root                     (default <repo>/demo/out/airflow-lake)
    CDC_PIPELINE        pipeline name                 (default demo)
    CDC_TOPICS_DIR      topic dumps to land from      (default <repo>/demo/topics)
    CDC_FORMAT          message format                (default debezium)
    CDC_SOURCE_COUNTS   JSON file or SQLAlchemy URL   (default sqlite:///<repo>/demo/source.db)
    CDC_ALERT_TO        comma-separated recipients    (default none: alerts are reported, not sent)
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
APPLICATION = str(REPO / "jobs" / "cli.py")
LAND_TASK = "land"


@dataclass(frozen=True)
class PipelineSettings:
    lake: str
    pipeline: str
    topics_dir: str
    fmt: str
    source_counts: str | None
    alert_to: tuple[str, ...]


def settings(env: dict[str, str] | None = None) -> PipelineSettings:
    env = os.environ if env is None else env
    return PipelineSettings(
        lake=env.get("CDC_LAKE") or str(REPO / "demo" / "out" / "airflow-lake"),
        pipeline=env.get("CDC_PIPELINE") or "demo",
        topics_dir=env.get("CDC_TOPICS_DIR") or str(REPO / "demo" / "topics"),
        fmt=env.get("CDC_FORMAT") or "debezium",
        source_counts=env.get("CDC_SOURCE_COUNTS", f"sqlite:///{REPO / 'demo' / 'source.db'}") or None,
        alert_to=tuple(a.strip() for a in (env.get("CDC_ALERT_TO") or "").split(",") if a.strip()),
    )


def _utc(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc)
    parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed.astimezone(timezone.utc) if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def resolve_interval(params: dict | None, data_interval_start: Any, data_interval_end: Any) -> tuple[datetime, datetime]:
    """The run's [start, end): params `start`/`end` (manual runs and backfills of any window) win,
    else the data interval. A zero-width window is refused: it would land nothing."""
    params = params or {}
    start = _utc(params.get("start") or data_interval_start)
    end = _utc(params.get("end") or data_interval_end)
    if end <= start:
        raise ValueError(
            f"empty interval {start.isoformat()} .. {end.isoformat()}: a manual run needs params start and end"
        )
    return start, end


def run_id_for(start: datetime, end: datetime) -> str:
    """Deterministic from the interval, so a re-run or backfill of an interval reuses its run id."""
    return f"{start:%Y%m%dT%H%M%SZ}_{end:%Y%m%dT%H%M%SZ}"


def land(params: dict | None = None, data_interval_start: Any = None, data_interval_end: Any = None,
         **_context: Any) -> dict:
    """Land the interval's messages of every topic; returns what the later tasks need (XCom)."""
    from jobs.lake import Lake
    from jobs.land import land_files

    cfg = settings()
    start, end = resolve_interval(params, data_interval_start, data_interval_end)
    lake = Lake.at(cfg.lake)
    lake.check_usable()
    manifests = land_files(cfg.topics_dir, None, lake, cfg.pipeline, start, end)
    interval = f"interval={start:%Y%m%dT%H%M%SZ}_{end:%Y%m%dT%H%M%SZ}"
    return {
        "run_id": run_id_for(start, end),
        "raw": lake.join(f"raw/{cfg.pipeline}") + f"/*/{interval}",
        "messages": sum(m["totals"]["records"] for m in manifests),
        "topics": [m["topic"] for m in manifests],
    }


def _from_land(field: str) -> str:
    return "{{ ti.xcom_pull(task_ids='" + LAND_TASK + "')['" + field + "'] }}"


def stage_args(stage: str, cfg: PipelineSettings | None = None) -> list[str]:
    """spark-submit application arguments of a Spark stage (templated with the land task's XCom)."""
    cfg = cfg or settings()
    args = [stage, "--lake", cfg.lake, "--pipeline", cfg.pipeline, "--run-id", _from_land("run_id")]
    if stage == "decode":
        args += ["--format", cfg.fmt, "--raw", _from_land("raw")]
    return args


def spark_env() -> dict[str, str]:
    """Environment of the spark-submit'ed driver: this repo importable, this interpreter for Python."""
    return {
        "PYTHONPATH": str(REPO),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_SUBMIT_ACTIVE": "1",
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }


def _context_for(run_id: str):
    from jobs.lake import Lake
    from jobs.stages import RunContext

    cfg = settings()
    return cfg, RunContext(Lake.at(cfg.lake), cfg.pipeline, run_id)


def reconcile(ti: Any = None, **_context: Any) -> list[dict]:
    from jobs.stages import run_reconcile

    cfg, ctx = _context_for(ti.xcom_pull(task_ids=LAND_TASK)["run_id"])
    return run_reconcile(ctx, cfg.source_counts)


def _smtp_from_airflow():
    """The smtp_default connection wherever Airflow keeps it (metadata db, secrets backend, env)."""
    from airflow.sdk import BaseHook

    from jobs.alert import settings_from_connection

    try:
        conn = BaseHook.get_connection("smtp_default")
    except Exception:  # noqa: BLE001 - no such connection: the environment's SMTP_* settings apply
        return None
    return settings_from_connection(conn)


def alert(ti: Any = None, **_context: Any) -> dict:
    from jobs.alert import run_alert

    cfg, ctx = _context_for(ti.xcom_pull(task_ids=LAND_TASK)["run_id"])
    validation = ctx.read_report("validation.json") or {"success": True, "suites": []}
    reconciliation = (ctx.read_report("reconciliation.json") or {"tables": []})["tables"]
    decode = ctx.read_report("decode.json") or {}
    result = run_alert(cfg.pipeline, ctx.run_id, validation, reconciliation, decode, list(cfg.alert_to),
                       ctx.lake.join(ctx.report_dir), settings=_smtp_from_airflow() if cfg.alert_to else None)
    ctx.write_report("alert.json", result)
    return {"sent": result["sent"], "problems": len(result["reasons"]), "error": result["error"]}
