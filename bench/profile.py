"""Where the pipeline's JVM time goes: one ``jobs run`` under Java Flight Recorder, summarized.

    .venv/bin/python -m bench.profile --raw bench/data/debezium-1000000 [--format debezium] [--top 25]

Runs the pipeline end to end in this process on a scratch lake, with JFR sampling the driver JVM
(in local mode also the executor) and Spark writing its event log, then prints every Spark job that
took a while (when, how long, its tasks' run / CPU / GC seconds, where it was called from), per stage
the hottest methods (self, and inclusive: on the stack) of the sampled Java threads, and the JIT
compiler's totals. Stages are cut by the run's own stage timings, laid end to end from the run's
start (so their edges are approximate). The recording is kept (``--keep``) for JDK Mission Control
or ``jfr print``. Needs the JDK's ``jcmd`` and ``jfr`` (Java 17: both ship with it).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path


def _frame_name(frame: dict) -> str:
    method = frame["method"]
    return f'{method["type"]["name"].rsplit("/", 1)[-1]}.{method["name"]}'


def _instant(text: str) -> datetime:
    # JFR prints ISO instants with nanoseconds; microseconds are enough here
    head, _, tail = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{(tail + '000000')[:6]}").replace(tzinfo=UTC)


def _seconds(duration: str) -> float:
    """A JFR duration as printed (ISO 8601, e.g. PT1M7.2S) in seconds."""
    match = re.fullmatch(r"PT(?:(\d+)H)?(?:(\d+)M)?(?:([\d.]+)S)?", duration)
    if not match:
        raise ValueError(f"not a JFR duration: {duration!r}")
    hours, minutes, seconds = match.groups()
    return int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)


def stage_windows(start: datetime, timings: dict[str, float]) -> list[tuple[str, datetime, datetime]]:
    """(stage, from, to) laid end to end from ``start`` in the order the run takes them."""
    order = ("decode", "fold_publish", "validate", "reconcile", "alert")
    windows, at = [], start
    for stage in [s for s in order if s in timings]:
        end = at + timedelta(seconds=timings[stage])
        windows.append((stage, at, end))
        at = end
    return windows


def summarize(samples: list[dict], windows: list[tuple[str, datetime, datetime]], top: int) -> dict[str, dict]:
    """Per stage: the sample count and the ``top`` methods by self and by inclusive samples."""
    out: dict[str, dict] = {}
    by_stage: dict[str, list[list[str]]] = {name: [] for name, _, _ in windows}
    for event in samples:
        values = event["values"]
        stack = values.get("stackTrace")
        if not stack or not stack.get("frames"):
            continue
        at = _instant(values["startTime"])
        for name, start, end in windows:
            if start <= at < end:
                by_stage[name].append([_frame_name(f) for f in stack["frames"]])
                break
    for name, stacks in by_stage.items():
        own, inclusive = Counter(), Counter()
        for frames in stacks:
            own[frames[0]] += 1
            inclusive.update(list(dict.fromkeys(frames)))  # once per stack, in stack order
        out[name] = {"samples": len(stacks), "self": own.most_common(top), "inclusive": inclusive.most_common(top)}
    return out


def spark_jobs(events: Iterable[dict]) -> list[dict]:
    """Per Spark job of an event log (its JSON lines, parsed): its start in seconds from the first
    job's, its duration, its tasks with their summed run, CPU and GC seconds, and its call site."""
    jobs: dict[int, dict] = {}
    stage_job: dict[int, int] = {}
    for event in events:
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            stages = event.get("Stage Infos") or [{}]
            jobs[event["Job ID"]] = {"job": event["Job ID"], "start_ms": event["Submission Time"], "end_ms": None,
                                     "tasks": 0, "run_s": 0.0, "cpu_s": 0.0, "gc_s": 0.0,
                                     "call_site": stages[-1].get("Stage Name", "")}
            stage_job.update({stage: event["Job ID"] for stage in event.get("Stage IDs", [])})
        elif kind == "SparkListenerJobEnd" and event["Job ID"] in jobs:
            jobs[event["Job ID"]]["end_ms"] = event["Completion Time"]
        elif kind == "SparkListenerTaskEnd" and stage_job.get(event["Stage ID"]) in jobs:
            job, metrics = jobs[stage_job[event["Stage ID"]]], event.get("Task Metrics") or {}
            job["tasks"] += 1
            job["run_s"] += metrics.get("Executor Run Time", 0) / 1e3
            job["cpu_s"] += metrics.get("Executor CPU Time", 0) / 1e9
            job["gc_s"] += metrics.get("JVM GC Time", 0) / 1e3
    first = min((j["start_ms"] for j in jobs.values()), default=0)
    out = []
    for job in sorted(jobs.values(), key=lambda j: j["job"]):
        start, end = job.pop("start_ms"), job.pop("end_ms")
        out.append({**job, "start_s": (start - first) / 1e3, "seconds": (end - start) / 1e3 if end else None})
    return out


def _read_event_log(directory: str) -> list[dict]:
    """The events of the one application that logged into ``directory`` (plain JSON lines, rolled or not)."""
    files = sorted(p for p in Path(directory).rglob("*") if p.is_file() and not p.name.startswith(".")
                   and not p.name.startswith("appstatus"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]


def _jdk_tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise SystemExit(f"bench.profile needs the JDK's `{name}` on PATH")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--raw", required=True, help="a landed snapshot (e.g. bench/data/debezium-1000000)")
    parser.add_argument("--format", default="debezium")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--keep", help="keep the JFR recording at this path")
    parser.add_argument("--job-seconds", type=float, default=0.3, help="list the Spark jobs longer than this")
    args = parser.parse_args(argv)
    jcmd, jfr = _jdk_tool("jcmd"), _jdk_tool("jfr")

    repo = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(repo))
    import jobs.spark.session as spark_settings

    spark_settings.SPARK_CONF["spark.driver.extraJavaOptions"] = (
        f'{spark_settings.JVM_OPTIONS} -XX:StartFlightRecording=settings=profile')
    from jobs import cli

    with tempfile.TemporaryDirectory(prefix="cdc-profile-") as scratch:
        event_log = f"{scratch}/events"
        Path(event_log).mkdir()
        spark_settings.SPARK_CONF.update({"spark.eventLog.enabled": "true", "spark.eventLog.compress": "false",
                                          "spark.eventLog.dir": Path(event_log).as_uri()})
        spark = spark_settings.build_spark("cdc-profile")
        pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        lake = f"{scratch}/lake"
        recording = str(Path(args.keep).resolve()) if args.keep else f"{scratch}/run.jfr"
        start = datetime.now(UTC)
        began = time.perf_counter()
        rc = cli.main(["run", "--format", args.format, "--raw", args.raw, "--lake", lake,
                       "--pipeline", "profile", "--run-id", "profile"])
        wall = time.perf_counter() - began
        subprocess.run([jcmd, str(pid), "JFR.dump", f"filename={recording}"], check=True, capture_output=True)
        report = Path(f"{lake}/reports/profile/run=profile/run.json")
        if not report.exists():
            raise SystemExit(f"the run failed before writing its report (exit {rc}): nothing to cut by stage")
        timings = json.loads(report.read_text())["timings_s"]
        printed = subprocess.run([jfr, "print", "--json", "--events", "jdk.ExecutionSample,jdk.CompilerStatistics",
                                  recording], check=True, capture_output=True, text=True).stdout
        spark.stop()  # flushes the event log
        jobs = spark_jobs(_read_event_log(event_log))
    events = json.loads(printed)["recording"]["events"]
    samples = [e for e in events if e["type"] == "jdk.ExecutionSample"]
    compiler = [e["values"] for e in events if e["type"] == "jdk.CompilerStatistics"]

    print(f"run exit {rc}, {wall:.1f} s; stages (s): {timings}")
    print(f"\n== Spark jobs: {len(jobs)}, those over {args.job_seconds} s (start s from the first job; tasks' "
          "summed run / CPU / GC s)")
    for job in jobs:
        if (job["seconds"] or 0) > args.job_seconds:
            print(f"{job['job']:5d} @{job['start_s']:7.1f} {job['seconds']:7.2f} s {job['tasks']:4d} tasks "
                  f"run {job['run_s']:7.1f} cpu {job['cpu_s']:7.1f} gc {job['gc_s']:5.1f}  {job['call_site']}")
    if compiler:
        last = compiler[-1]
        print(f"JIT: {last['compileCount']} compilations, {_seconds(last['totalTimeSpent']):.1f} s of the compiler "
              f"threads' time, {last['nmethodsSize'] / 2**20:.1f} MB of compiled code")
    for stage, found in summarize(samples, stage_windows(start, timings), args.top).items():
        print(f"\n== {stage}: {found['samples']} samples")
        for kind in ("self", "inclusive"):
            print(f"-- {kind}")
            for name, count in found[kind]:
                print(f"{count:6d} {100 * count / max(found['samples'], 1):5.1f}%  {name}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
